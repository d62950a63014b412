//! What the relay benches read from their environment: settings with defaults, and the
//! PostgreSQL URL they derive their own users' and databases' URLs from.

/// The variable `key`, or `default` when it is unset or empty.
pub fn env_or(key: &str, default: &str) -> String {
    std::env::var(key)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The number in variable `key`, or `default` when it is unset, empty or not a number.
pub fn count(key: &str, default: usize) -> usize {
    env_or(key, &default.to_string()).parse().unwrap_or(default)
}

/// `scheme://user@host/db` with the user and database replaced.
pub fn with_user_and_db(url: &str, user: &str, db: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host_and_path = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host_and_path.split('/').next()?;
    Some(format!("{scheme}://{user}@{host}/{db}"))
}

/// The user a URL names (`postgres` when it names none).
pub fn admin_user(url: &str) -> &str {
    url.split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .map(|(user, _)| user.split(':').next().unwrap_or("postgres"))
        .unwrap_or("postgres")
}
