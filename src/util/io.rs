//! Bounded reads from pipes and other byte streams.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads everything, or `None` as soon as there is more than `limit` bytes (the reader is then
/// dropped, so a writer blocked on a full pipe gets an error instead of hanging). For HTTP
/// response bodies see [`crate::util::http::read_capped`].
pub async fn read_capped(
    reader: impl AsyncRead + Unpin,
    limit: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(cap).read_to_end(&mut bytes).await?;
    Ok((bytes.len() <= limit).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_are_capped() {
        let data = vec![b'a'; 100];
        assert_eq!(
            read_capped(&data[..], 100).await.unwrap(),
            Some(data.clone())
        );
        assert_eq!(read_capped(&data[..], 99).await.unwrap(), None);
        assert_eq!(read_capped(&b""[..], 0).await.unwrap(), Some(Vec::new()));
    }
}
