//! What the reader reads, sentence by sentence: the phrase corpus (`tests/phrases/corpus.txt`,
//! 160 sentences in four domains, none of them travel) against the readings it yields
//! (`tests/phrases/readings.txt`), in expect-test style. A change to the reader that changes a
//! reading fails here with the diff; if the change is meant, write the readings anew with
//! `UPDATE_EXPECT=1 cargo test -p toolgraph-engine --test phrase_corpus` and review them. Add a
//! sentence with every reading rule.

use chrono::NaiveDate;
use std::fmt::Write;
use std::path::PathBuf;
use toolgraph_engine::read::{ordering_words, RequestValues};

fn here(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/phrases").join(name)
}

/// One sentence's reading, the lists it filled, one per line.
fn reading(sentence: &str) -> String {
    let today = NaiveDate::from_ymd_opt(2026, 3, 10).unwrap();
    let v = RequestValues::extract(sentence, today);
    let mut out = String::new();
    let mut line = |label: &str, items: Vec<String>| {
        if !items.is_empty() {
            let _ = writeln!(out, "  {label}: {}", items.join(" | "));
        }
    };
    line("today", v.today.iter().map(ToString::to_string).collect());
    line("dates", v.dates.iter().map(ToString::to_string).collect());
    line("unanchored", v.unanchored.iter().map(ToString::to_string).collect());
    line("times", v.times.clone());
    line(
        "numbers",
        v.numbers
            .iter()
            .map(|n| if n.word.is_empty() { format!("{}", n.value) } else { format!("{} {}", n.value, n.word) })
            .collect(),
    );
    line("shifts (min)", v.shifts.iter().map(ToString::to_string).collect());
    line("names", v.names.clone());
    line("quoted", v.quoted.clone());
    line("emails", v.emails.clone());
    line("urls", v.urls.clone());
    line("phones", v.phones.clone());
    line("files", v.files.clone());
    line("labelled", v.labelled.iter().map(|(k, t)| format!("{k} = {t}")).collect());
    line("ordering", ordering_words(sentence));
    if out.is_empty() {
        out.push_str("  (nothing)\n");
    }
    out
}

#[test]
fn the_phrase_corpus_reads_as_written_down() {
    let corpus = std::fs::read_to_string(here("corpus.txt")).unwrap();
    let (mut domains, mut sentences) = (Vec::new(), 0);
    let mut got = String::from(
        "# What the reader reads in each sentence of corpus.txt (today: 2026-03-10 unless the sentence says).\n",
    );
    for line in corpus.lines().map(str::trim) {
        if let Some(domain) = line.strip_prefix("## ") {
            domains.push(domain.to_string());
            let _ = writeln!(got, "\n## {domain}");
        } else if !line.is_empty() && !line.starts_with('#') {
            sentences += 1;
            let _ = write!(got, "\n> {line}\n{}", reading(line));
        }
    }
    assert!(sentences >= 150, "the corpus holds {sentences} sentences; it should hold at least 150");
    assert!(domains.len() >= 3, "the corpus spans {} domains; it should span at least 3", domains.len());
    let path = here("readings.txt");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want != got {
        // Block by block (a sentence and its reading), so one changed reading is one entry.
        let blocks = |t: &str| t.split("\n\n").map(str::to_string).collect::<Vec<_>>();
        let (w, g) = (blocks(&want), blocks(&got));
        let mut diff = String::new();
        for b in g.iter().filter(|b| !w.contains(b)) {
            let sentence = b.lines().next().unwrap_or_default();
            let was = w.iter().find(|x| x.lines().next() == Some(sentence));
            let _ = writeln!(diff, "now:\n{b}\nwas:\n{}\n", was.map_or("(not in readings.txt)", String::as_str));
            if diff.len() > 6000 {
                break;
            }
        }
        panic!(
            "the reader reads the corpus otherwise than readings.txt says (first differences below); if meant, run with UPDATE_EXPECT=1 and review the diff\n{diff}"
        );
    }
}
