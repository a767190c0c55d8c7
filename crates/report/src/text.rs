//! Plain-text layout for terminals of a given width: word-wrapped lines and
//! grids whose cells wrap at spaces and whose columns fold onto further
//! stacks rather than ever splitting a token. The width is always passed in
//! (only the CLI knows the terminal).

use textwrap::core::display_width;

/// Narrowest width laid out; below it lines simply overflow.
pub const MIN_WIDTH: usize = 40;

/// `text` wrapped at spaces to `width`, continuation lines indented by
/// `indent` spaces. A token longer than a line is kept whole.
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let opts = textwrap::Options::new(width.max(MIN_WIDTH))
        .subsequent_indent(&pad)
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    textwrap::fill(text, opts)
}

/// Like [`wrap`], but breaking only at " · " separators where possible, so
/// that "p99 8.17 us" stays on one line; each continuation starts at
/// `indent`.
pub fn wrap_parts(parts: &[String], first_width: usize, width: usize, indent: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for p in parts {
        let budget = if lines.is_empty() { first_width } else { width.saturating_sub(indent) };
        let candidate = if cur.is_empty() { p.clone() } else { format!("{cur} · {p}") };
        if cur.is_empty() || display_width(&candidate) <= budget {
            cur = candidate;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = p.clone();
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A " · "-separated line (headers, environment) packed into lines of
/// `width`, breaking only at the separators; continuations indented by 2.
pub fn wrap_dots(line: &str, width: usize) -> String {
    let width = width.max(MIN_WIDTH);
    let parts: Vec<String> = line.split(" · ").map(String::from).collect();
    wrap_parts(&parts, width, width, 2)
        .into_iter()
        .enumerate()
        .map(|(i, l)| if i == 0 { l } else { format!("  {l}") })
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Align {
    Left,
    Right,
}

/// A plain grid: a header row, a rule, then rows. The first column labels
/// the rows and is repeated on every stack when the columns must fold.
pub struct Grid {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    /// Rows after which a blank line separates groups.
    breaks: Vec<usize>,
    /// Full-width lines (group headings) printed before the row of that index.
    headings: Vec<(usize, String)>,
}

const GAP: usize = 2;

/// Columns a cell takes: its length when it is ASCII (nearly every cell,
/// and a fleet's history has a million of them), else its display width.
fn width_of(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        display_width(s)
    }
}

impl Grid {
    pub fn new(header: Vec<String>, align: Vec<Align>) -> Grid {
        assert_eq!(header.len(), align.len());
        Grid { header, align, rows: Vec::new(), breaks: Vec::new(), headings: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// A heading line across the whole grid before the next row (after a
    /// blank line unless it is the first).
    pub fn heading(&mut self, text: String) {
        self.group_break();
        self.headings.push((self.rows.len(), text));
    }

    /// A blank line before the next row.
    pub fn group_break(&mut self) {
        if !self.rows.is_empty() {
            self.breaks.push(self.rows.len());
        }
    }

    fn cells(&self, col: usize) -> impl Iterator<Item = &String> {
        std::iter::once(&self.header[col]).chain(self.rows.iter().map(move |r| &r[col]))
    }

    /// Widest cell of a column, and its longest word (the least it can wrap to).
    fn widths(&self, col: usize) -> (usize, usize) {
        self.cells(col).fold((0, 0), |(natural, word), c| {
            (natural.max(width_of(c)), word.max(c.split(' ').map(width_of).max().unwrap_or(0)))
        })
    }

    pub fn render(&self, width: usize) -> String {
        let width = width.max(MIN_WIDTH);
        let n = self.header.len();
        let dims: Vec<(usize, usize)> = (0..n).map(|c| self.widths(c)).collect();
        // Fold the value columns into stacks that fit at their least width.
        let mut stacks: Vec<Vec<usize>> = Vec::new();
        let mut cur: Vec<usize> = Vec::new();
        let mut used = dims[0].1;
        for (c, d) in dims.iter().enumerate().skip(1) {
            if !cur.is_empty() && used + GAP + d.1 > width {
                stacks.push(std::mem::take(&mut cur));
                used = dims[0].1;
            }
            used += GAP + d.1;
            cur.push(c);
        }
        if !cur.is_empty() || stacks.is_empty() {
            stacks.push(cur);
        }
        let mut out = Vec::new();
        for stack in &stacks {
            let cols: Vec<usize> = std::iter::once(0).chain(stack.iter().copied()).collect();
            let w = fit(&cols.iter().map(|&c| dims[c]).collect::<Vec<_>>(), width);
            if !out.is_empty() {
                out.push(String::new());
            }
            let header: Vec<&String> = cols.iter().map(|&c| &self.header[c]).collect();
            out.extend(self.lines(&header, &cols, &w));
            out.push(w.iter().map(|&x| "─".repeat(x)).collect::<Vec<_>>().join(&" ".repeat(GAP)));
            // Breaks and headings were added in row order: walk them along
            // (a search per row is quadratic over a fleet's history).
            let (mut next_break, mut next_heading) = (0, 0);
            for (i, r) in self.rows.iter().enumerate() {
                let mut blank = false;
                while next_break < self.breaks.len() && self.breaks[next_break] <= i {
                    blank |= self.breaks[next_break] == i;
                    next_break += 1;
                }
                if blank {
                    out.push(String::new());
                }
                while next_heading < self.headings.len() && self.headings[next_heading].0 <= i {
                    if self.headings[next_heading].0 == i {
                        out.push(wrap(&self.headings[next_heading].1, width, 4));
                    }
                    next_heading += 1;
                }
                let cells: Vec<&String> = cols.iter().map(|&c| &r[c]).collect();
                out.extend(self.lines(&cells, &cols, &w));
            }
        }
        out.join("\n")
    }

    /// One grid row: each cell wrapped to its column, side by side.
    fn lines(&self, cells: &[&String], cols: &[usize], w: &[usize]) -> Vec<String> {
        // Most rows fit on one line: written straight, nothing wrapped or
        // copied (a fleet's history has 100,000 of them).
        let mut line = String::new();
        for (i, (text, &cw)) in cells.iter().zip(w).enumerate() {
            let shown = width_of(text);
            if shown > cw {
                return self.wrapped_lines(cells, cols, w);
            }
            if i > 0 {
                line.push_str(&" ".repeat(GAP));
            }
            let pad = " ".repeat(cw - shown);
            match self.align[cols[i]] {
                Align::Left => {
                    line.push_str(text);
                    line.push_str(&pad);
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(text);
                }
            }
        }
        line.truncate(line.trim_end().len());
        vec![line]
    }

    fn wrapped_lines(&self, cells: &[&String], cols: &[usize], w: &[usize]) -> Vec<String> {
        let wrapped: Vec<Vec<String>> = cells
            .iter()
            .zip(w)
            .map(|(c, &cw)| {
                if display_width(c) <= cw {
                    vec![c.to_string()]
                } else {
                    let opts = textwrap::Options::new(cw.max(1))
                        .break_words(false)
                        .word_splitter(textwrap::WordSplitter::NoHyphenation);
                    textwrap::wrap(c, opts).into_iter().map(|l| l.into_owned()).collect()
                }
            })
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        (0..height)
            .map(|k| {
                let mut line = String::new();
                for (i, (cell, &cw)) in wrapped.iter().zip(w).enumerate() {
                    let text = cell.get(k).map(String::as_str).unwrap_or("");
                    let pad = cw.saturating_sub(display_width(text));
                    if i > 0 {
                        line.push_str(&" ".repeat(GAP));
                    }
                    match self.align[cols[i]] {
                        Align::Left => {
                            line.push_str(text);
                            line.push_str(&" ".repeat(pad));
                        }
                        Align::Right => {
                            line.push_str(&" ".repeat(pad));
                            line.push_str(text);
                        }
                    }
                }
                line.trim_end().to_string()
            })
            .collect()
    }
}

/// Column widths within `width`: natural widths when they fit, else the
/// widest columns shrink toward their longest word.
fn fit(dims: &[(usize, usize)], width: usize) -> Vec<usize> {
    let mut w: Vec<usize> = dims.iter().map(|d| d.0).collect();
    let total = |w: &[usize]| w.iter().sum::<usize>() + GAP * w.len().saturating_sub(1);
    while total(&w) > width {
        // Shrink the column with the most room above its least width.
        let Some((i, _)) = w.iter().enumerate().filter(|(i, &x)| x > dims[*i].1).max_by_key(|(i, &x)| x - dims[*i].1)
        else {
            break;
        };
        w[i] -= 1;
    }
    w
}

/// The longest line's display width (tests and callers that check a fit).
pub fn max_line_width(text: &str) -> usize {
    text.lines().map(display_width).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        let mut g = Grid::new(
            vec!["metric".into(), "#1 (baseline)".into(), "#2".into(), "change [95% CI] verdict".into()],
            vec![Align::Left, Align::Right, Align::Right, Align::Left],
        );
        g.row(vec![
            "round_trips_per_s ↑".into(),
            "161,403/s".into(),
            "160,000/s".into(),
            "-0.9% [-2.1%, +0.3%] within noise (band ±2.0%)".into(),
        ]);
        g.row(vec!["latency p99 ↓".into(), "8.17 us".into(), "9.00 us".into(), "+10.2% [+5.0%, +15.0%] worse".into()]);
        g
    }

    #[test]
    fn a_grid_fits_the_width_without_splitting_a_word() {
        for width in [40, 60, 80, 100, 200] {
            let text = grid().render(width);
            assert!(max_line_width(&text) <= width, "width {width}:\n{text}");
            for word in ["round_trips_per_s", "161,403/s", "[-2.1%,", "±2.0%)", "within"] {
                assert!(
                    text.split_whitespace().any(|w| w == word || w.contains(word)),
                    "{word} split at {width}:\n{text}"
                );
            }
        }
        let wide = grid().render(200);
        assert_eq!(wide.lines().count(), 4, "header, rule, two rows:\n{wide}");
        assert!(grid().render(60).lines().count() > 4, "the verdict column wraps at 60");
    }

    #[test]
    fn too_many_columns_fold_into_stacks_that_repeat_the_labels() {
        let mut g = Grid::new(
            std::iter::once("jobs".to_string()).chain((1..=12).map(|j| format!("value{j:02}"))).collect(),
            vec![Align::Right; 13],
        );
        g.row(std::iter::once("wall".to_string()).chain((1..=12).map(|j| format!("{j}.000 ms"))).collect());
        let text = g.render(80);
        assert!(max_line_width(&text) <= 80, "{text}");
        assert!(text.matches("wall").count() >= 2, "the label repeats on each stack:\n{text}");
        assert!(text.contains("value12") && text.contains("12.000 ms"), "{text}");
    }

    #[test]
    fn parts_break_at_separators() {
        let parts: Vec<String> = ["p99 8.17 us", "p99.9 19.28 us", "max 256.35 us"].map(String::from).into();
        assert_eq!(wrap_parts(&parts, 100, 100, 4), vec!["p99 8.17 us · p99.9 19.28 us · max 256.35 us"]);
        assert_eq!(wrap_parts(&parts, 30, 80, 50), vec!["p99 8.17 us · p99.9 19.28 us", "max 256.35 us"]);
        let w =
            wrap("warning: a long line that must wrap at word boundaries only, never inside a same-cpu token", 40, 2);
        assert!(w.lines().all(|l| display_width(l) <= 40) && w.lines().skip(1).all(|l| l.starts_with("  ")), "{w}");
        assert!(w.contains("same-cpu"), "no break at a hyphen: {w}");
    }
}
