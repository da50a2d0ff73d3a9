//! `toolgraph eval all`: one report over the benchmarks — the markdown of each, and an SVG of
//! each benchmark's headline metric, toolgraph's methods next to the best published row.

use serde::{Deserialize, Serialize};

/// One bar group: a benchmark's headline metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    /// "ComplexFuncBench — Overall Success Rate (%)".
    pub title: String,
    /// (label, value in %, published?) in drawing order.
    pub bars: Vec<(String, f64, bool)>,
}

/// How many reasons a markdown report lists (every one is in the JSON report).
const SKIPPED_LISTED: usize = 10;

/// The markdown footer of what a benchmark run skipped: how many `what`s, and why (the first
/// [`SKIPPED_LISTED`] reasons); empty when nothing was skipped.
pub fn skipped_md(what: &str, skipped: &[String]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut s = format!("\n{} {what}(s) skipped:\n", skipped.len());
    for r in skipped.iter().take(SKIPPED_LISTED) {
        s.push_str(&format!("- {r}\n"));
    }
    if skipped.len() > SKIPPED_LISTED {
        s.push_str(&format!("- … and {} more (all listed in the JSON report)\n", skipped.len() - SKIPPED_LISTED));
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Horizontal bars, one panel per benchmark, on a 0–100 scale; published rows grey.
pub fn svg(panels: &[Panel]) -> String {
    let (w, left, right, bar, gap, head) = (720.0, 250.0, 60.0, 18.0, 4.0, 28.0);
    let pw = w - left - right;
    let height: f64 = panels.iter().map(|p| head + p.bars.len() as f64 * (bar + gap) + 16.0).sum::<f64>() + 20.0;
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let mut y = 10.0;
    for p in panels {
        s.push_str(&format!(
            "<text x=\"10\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
            y + 16.0,
            esc(&p.title)
        ));
        y += head;
        for (label, v, published) in &p.bars {
            let bw = pw * (v.clamp(0.0, 100.0) / 100.0);
            let color = if *published { "#9e9e9e" } else { "#1f77b4" };
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><rect x=\"{left}\" y=\"{y}\" width=\"{bw:.1}\" height=\"{bar}\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{v:.2}</text>\n",
                left - 6.0,
                y + bar - 5.0,
                esc(label),
                left + bw + 4.0,
                y + bar - 5.0
            ));
            y += bar + gap;
        }
        y += 16.0;
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_percent_and_labels_are_escaped() {
        let out = svg(&[Panel {
            title: "A <b>".into(),
            bars: vec![("GPT-4o".into(), 50.0, true), ("toolgraph `graph`".into(), 100.0, false)],
        }]);
        assert!(out.contains("A &lt;b&gt;"));
        // 410 px of plot width: half for 50 %, all of it for 100 %.
        assert!(out.contains("width=\"205.0\" height=\"18\" fill=\"#9e9e9e\""), "{out}");
        assert!(out.contains("width=\"410.0\" height=\"18\" fill=\"#1f77b4\""), "{out}");
    }

    #[test]
    fn the_skipped_footer_counts_and_lists_the_reasons() {
        assert_eq!(skipped_md("sample", &[]), "");
        let two = skipped_md("sample", &["a: bad".into(), "b: worse".into()]);
        assert_eq!(two, "\n2 sample(s) skipped:\n- a: bad\n- b: worse\n");
        let many: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
        let out = skipped_md("record", &many);
        assert!(out.starts_with("\n12 record(s) skipped:\n- r0\n"), "{out}");
        assert!(out.contains("- r9\n") && !out.contains("- r10\n"), "{out}");
        assert!(out.ends_with("- … and 2 more (all listed in the JSON report)\n"), "{out}");
    }
}
