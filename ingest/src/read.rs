//! Reading input files: gzip detected by magic bytes, records bounded in size.

use crate::error::RecordError;
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Open a file for reading, transparently gunzipping it.
pub fn open(path: &Path) -> std::io::Result<Box<dyn BufRead + Send>> {
    let mut f = File::open(path)?;
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic)?;
    drop(f);
    let f = File::open(path)?;
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(f))))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
    }
}

/// Read a whole file that holds one JSON document, refusing files over `max` bytes
/// (after decompression) without reading them whole.
pub fn read_document(path: &Path, max: u64) -> Result<Vec<u8>, RecordError> {
    let mut r = open(path).map_err(|e| RecordError::new(path, "file", format!("cannot read: {e}")))?;
    let mut buf = Vec::new();
    let n = (&mut r)
        .take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| RecordError::new(path, "file", format!("cannot read: {e}")))?;
    if n as u64 > max {
        return Err(RecordError::new(path, "file", format!("larger than the {max}-byte record limit; skipped")));
    }
    if buf.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(RecordError::new(path, "file", "empty file"));
    }
    Ok(buf)
}

/// One line of a JSONL file.
pub enum Line {
    Record {
        number: u64,
        bytes: Vec<u8>,
    },
    /// The line was longer than the limit; it was skipped without being held in memory.
    TooLong {
        number: u64,
        len: u64,
    },
}

/// Lines of a (possibly gzipped) JSONL file, each at most `max` bytes; blank lines are skipped.
pub struct Lines {
    reader: Box<dyn BufRead + Send>,
    max: u64,
    number: u64,
}

impl Lines {
    pub fn open(path: &Path, max: u64) -> std::io::Result<Self> {
        Ok(Lines { reader: open(path)?, max, number: 0 })
    }
}

impl Iterator for Lines {
    type Item = std::io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut buf = Vec::new();
            let mut len: u64 = 0;
            let mut too_long = false;
            let mut saw_any = false;
            loop {
                let chunk = match self.reader.fill_buf() {
                    Ok(c) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Some(Err(e)),
                };
                if chunk.is_empty() {
                    break;
                }
                saw_any = true;
                let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => (&chunk[..i], Some(i + 1)),
                    None => (chunk, None),
                };
                len += part.len() as u64;
                if len > self.max {
                    too_long = true;
                    buf = Vec::new();
                } else if !too_long {
                    buf.extend_from_slice(part);
                }
                let consumed = done.unwrap_or(chunk.len());
                self.reader.consume(consumed);
                if done.is_some() {
                    break;
                }
            }
            if !saw_any {
                return None;
            }
            self.number += 1;
            if too_long {
                return Some(Ok(Line::TooLong { number: self.number, len }));
            }
            if buf.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            return Some(Ok(Line::Record { number: self.number, bytes: buf }));
        }
    }
}

/// Content key of a record: a hash of its bytes, so the same record is recognised wherever it is.
pub fn content_key(kind: &str, bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(kind.len() + 1 + 40);
    s.push_str(kind);
    s.push(':');
    for b in &digest[..20] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn long_lines_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        let mut f = File::create(&p).unwrap();
        writeln!(f, "{{\"a\":1}}").unwrap();
        writeln!(f, "{}", "x".repeat(5000)).unwrap();
        writeln!(f).unwrap();
        write!(f, "{{\"b\":2}}").unwrap(); // no trailing newline
        drop(f);
        let lines: Vec<Line> = Lines::open(&p, 100).unwrap().map(|l| l.unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert!(matches!(&lines[0], Line::Record { number: 1, bytes } if bytes == b"{\"a\":1}"));
        assert!(matches!(&lines[1], Line::TooLong { number: 2, len: 5000 }));
        assert!(matches!(&lines[2], Line::Record { number: 4, bytes } if bytes == b"{\"b\":2}"));
    }

    #[test]
    fn gzip_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.gz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&p).unwrap(), flate2::Compression::fast());
        enc.write_all(b"{\"a\":1}\n{\"a\":2}\n").unwrap();
        enc.finish().unwrap();
        assert_eq!(Lines::open(&p, 100).unwrap().count(), 2);
    }
}
