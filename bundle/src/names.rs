//! Names a user typed, held against the names there are: the "did you mean" of every message that
//! refuses a name (an input's key, a node of the bundle).

/// The closest of `candidates` to `word`, if close enough to be a typo: case, `-`/`_` and
/// one edit per three letters (a transposition counts as one) are forgiven.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let fold = |s: &str| -> Vec<char> { s.chars().filter(|c| !matches!(c, '-' | '_')).flat_map(char::to_lowercase).collect() };
    let w = fold(word);
    let limit = (w.len() / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (distance(&w, &fold(c)), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
fn distance(a: &[char], b: &[char]) -> usize {
    let mut prev2 = vec![0usize; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        prev2 = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_transpositions_once() {
        let c = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(distance(&c("baseDomian"), &c("baseDomain")), 1);
        assert_eq!(distance(&c("abc"), &c("abc")), 0);
        assert_eq!(distance(&c(""), &c("abc")), 3);
        assert_eq!(did_you_mean("zz", &["ip"]), None);
        assert_eq!(did_you_mean("BASEDOMAIN", &["baseDomain", "pullSecret"]), Some("baseDomain"));
    }
}
