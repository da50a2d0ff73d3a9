//! The text a tool answered, decoded the ways a server may have encoded a value it echoes —
//! percent-encoding, HTML entities (named and numeric), JSON string escapes (`\u0053`), hex and
//! base64 runs — each decoding applied to every result again, to [`DEPTH`] layers: what
//! [`leaks`] reads, so that a credential echoed through any composition of them (upper case then
//! hex, JSON then base64, HTML then percent, three layers of percent) is still recognised. The
//! credential's own encoded forms are replaced where they stand (`credentials::scrub`); a text
//! that leaks it only once decoded is withheld whole.

use base64::Engine as _;

/// Layers of encoding undone.
pub(super) const DEPTH: usize = 3;
/// The most decoded views of one text (each decoding that changes nothing adds none).
const MAX_VIEWS: usize = 256;
/// Runs of hex or base64 shorter than this are left as they are.
const MIN_RUN: usize = 8;

fn percent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest[..rest.len().min(12)].find(';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => name
                    .strip_prefix("#x")
                    .or_else(|| name.strip_prefix("#X"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, n)) => {
                out.push(c);
                rest = &rest[n..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn json_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('u') => {
                chars.next();
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(d) => out.push(d),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(e @ ('"' | '\\' | '/')) => {
                chars.next();
                out.push(e);
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// `s` with every maximal run of at least [`MIN_RUN`] characters of `alphabet` replaced by what
/// `decode` makes of it (a run it cannot decode is kept).
fn runs(s: &str, alphabet: impl Fn(char) -> bool, decode: impl Fn(&str) -> Option<Vec<u8>>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        match (run.len() >= MIN_RUN).then(|| decode(run)).flatten() {
            Some(bytes) => out.push_str(&String::from_utf8_lossy(&bytes)),
            None => out.push_str(run),
        }
        run.clear();
    };
    for c in s.chars() {
        if alphabet(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn hex(s: &str) -> String {
    runs(
        s,
        |c| c.is_ascii_hexdigit(),
        |r| {
            let r = &r[..r.len() - r.len() % 2];
            (0..r.len()).step_by(2).map(|i| u8::from_str_radix(&r[i..i + 2], 16).ok()).collect()
        },
    )
}

fn base64(s: &str) -> String {
    runs(
        s,
        |c| c.is_ascii_alphanumeric() || "+/=-_".contains(c),
        |r| {
            let r = r.trim_end_matches('=');
            let r = &r[..r.len() - usize::from(r.len() % 4 == 1)];
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(r)
                .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(r))
                .ok()
        },
    )
}

/// `text` and what each composition of up to [`DEPTH`] decodings makes of it (at most
/// [`MAX_VIEWS`], each different from the others).
pub(super) fn views(text: &str) -> Vec<String> {
    let decoders: [fn(&str) -> String; 5] = [percent, html, json_escapes, hex, base64];
    let mut all = vec![text.to_string()];
    let mut layer = vec![text.to_string()];
    for _ in 0..DEPTH {
        let mut next = Vec::new();
        for v in &layer {
            for d in decoders {
                let w = d(v);
                if all.len() < MAX_VIEWS && !all.contains(&w) {
                    all.push(w.clone());
                    next.push(w);
                }
            }
        }
        layer = next;
    }
    all
}

/// Whether `text`, decoded any of the ways of [`views`], holds `secret` in any letter case.
pub(super) fn leaks(text: &str, secret: &str) -> bool {
    let secret = secret.to_lowercase();
    !secret.is_empty() && views(text).iter().any(|v| v.to_lowercase().contains(&secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Third hardening, finding 7: ten compositions of encodings still leaked a credential.
    #[test]
    fn compositions_of_encodings_are_decoded() {
        let secret = "Sk-Live Ölkey/9";
        let pct = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
        let hexs = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let json_u = |s: &str| s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect::<String>();
        let entities = |s: &str| s.chars().map(|c| format!("&#{};", c as u32)).collect::<String>();
        for (what, text) in [
            ("upper case then hex", hexs(&secret.to_uppercase())),
            ("non-ASCII case", secret.to_uppercase()),
            ("triple percent", pct(&pct(&pct(secret)))),
            ("JSON \\u escapes", json_u(secret)),
            ("JSON then base64", b64(&serde_json::to_string(secret).unwrap())),
            ("HTML numeric entities", entities(secret)),
            ("HTML then percent", pct(&entities(secret))),
            ("hex entities", secret.chars().map(|c| format!("&#x{:X};", c as u32)).collect()),
            ("base64 of \\u escapes", b64(&json_u(secret))),
            ("percent in a URL in a longer text", format!("see https://x.test/?k={}&n=1 for more", pct(secret))),
        ] {
            assert!(leaks(&text, secret), "{what}: {text}");
        }
        assert!(!leaks("an answer that holds no key, 0123456789abcdef", secret));
        assert!(!leaks(&hexs("another value entirely"), secret));
    }
}
