//! Lists the daemon returns a page at a time (runs, sessions), read page by page up to the
//! `--limit` a command was given.

use std::future::Future;

use airlock_client::ClientError;

/// Items asked for per page: the most the daemon returns in one.
pub const MAX_PAGE_SIZE: u32 = 500;

/// Up to `limit` items (all of them for 0), and whether more were left out. `page(size,
/// token)` fetches one page of at most `size` items after `token` (empty for the first): its
/// items and the next page's token, empty after the last.
pub async fn collect<T, F, Fut>(limit: u32, mut page: F) -> Result<(Vec<T>, bool), ClientError>
where
    F: FnMut(u32, String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), ClientError>>,
{
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut items: Vec<T> = Vec::new();
    let mut page_token = String::new();
    loop {
        let wanted = match limit {
            0 => MAX_PAGE_SIZE,
            limit => u32::try_from(limit - items.len())
                .unwrap_or(u32::MAX)
                .min(MAX_PAGE_SIZE),
        };
        let (more, next_page_token) = page(wanted, page_token).await?;
        items.extend(more);
        if next_page_token.is_empty() {
            return Ok((items, false));
        }
        if limit != 0 && items.len() >= limit {
            items.truncate(limit);
            return Ok((items, true));
        }
        page_token = next_page_token;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon's list of `total` items, served `page_size` at a time at most.
    async fn list(total: u32, limit: u32) -> anyhow::Result<((Vec<u32>, bool), Vec<u32>)> {
        let mut asked = Vec::new();
        let listed = collect(limit, |size, token| {
            asked.push(size);
            let start: u32 = token.parse().unwrap_or(0);
            let end = (start + size.min(3)).min(total);
            let next = if end < total {
                end.to_string()
            } else {
                String::new()
            };
            async move { Ok(((start..end).collect(), next)) }
        })
        .await?;
        Ok((listed, asked))
    }

    #[tokio::test]
    async fn pages_are_read_up_to_the_limit_and_a_cut_is_reported() -> anyhow::Result<()> {
        let ((items, more), asked) = list(10, 5).await?;
        assert_eq!(items, [0, 1, 2, 3, 4]);
        assert!(more);
        // Only what is still wanted is asked for.
        assert_eq!(asked, [5, 2]);

        let ((items, more), _) = list(4, 50).await?;
        assert_eq!(items, [0, 1, 2, 3]);
        assert!(!more);

        let ((items, more), asked) = list(7, 0).await?;
        assert_eq!(items.len(), 7);
        assert!(!more);
        assert!(asked.iter().all(|&size| size == MAX_PAGE_SIZE));
        Ok(())
    }
}
