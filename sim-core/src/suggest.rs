//! "Did you mean": the valid name nearest a mistyped one, for error messages.

/// The valid key nearest `key` by edit distance (Levenshtein), when it is near enough to be a typo:
/// at most a third of the key's length, and at least 1, edits away.
pub fn did_you_mean<'a>(key: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (key.chars().count() / 3).max(1);
    valid
        .into_iter()
        .map(|v| (edit_distance(key, v), v))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, v)| (*d, *v))
        .map(|(_, v)| v)
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_nearest_key() {
        assert_eq!(edit_distance("shuffle_id", "shuffle_ids"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let keys = ["shuffle_ids", "seed", "steps", "limits"];
        assert_eq!(did_you_mean("shuffle_id", keys), Some("shuffle_ids"));
        assert_eq!(did_you_mean("limit", keys), Some("limits"));
        assert_eq!(did_you_mean("nope", keys), None);
    }
}
