//! Checks of request fields that the declaration format does not cover. The target is checked
//! by [`Target::validate`](crate::core::target::Target::validate).

use crate::core::decl::FieldError;

/// Validates a domain name: 1–128 characters of ASCII letters, digits, `_ - .`.
pub fn validate_domain(domain: &str) -> Result<(), FieldError> {
    let ok = !domain.is_empty()
        && domain.len() <= 128
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            "domain",
            "must be 1-128 characters of ASCII letters, digits, '_', '-' and '.'",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_simple_names() {
        assert!(validate_domain("billing").is_ok());
        assert!(validate_domain("billing-v2.eu").is_ok());
        assert!(validate_domain("").is_err());
        assert!(validate_domain("bill ing").is_err());
        assert!(validate_domain(&"x".repeat(129)).is_err());
    }
}
