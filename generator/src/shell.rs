//! Words for bash: what the inputs name goes into a generated script as one quoted word.

/// `s` as one bash word, whatever it holds (single quotes, each `'` written `'\''`).
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quoted_word_is_one_word_whatever_it_holds() {
        for s in ["/dev/sda", "/dev/sda; curl x | sh #", "it's", "$(id)", "a b"] {
            let out = std::process::Command::new("bash")
                .args([
                    "-c",
                    &format!("printf '%s\\n' {} | wc -l; printf %s {}", super::quote(s), super::quote(s)),
                ])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), format!("1\n{s}"), "{s:?}");
        }
    }
}
