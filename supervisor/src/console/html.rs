//! HTML for the console: escaping, the cut applied to everything a tool wrote, the page frame
//! and the calls chart. Nothing here puts text into a page unescaped: [`Html::text`] escapes,
//! [`Html::raw`] takes only `&'static str` (markup written here, never data).

use crate::redact::Redactor;
use std::fmt::Write as _;

/// The most characters of one piece of tool-written text (a description, an error, an event's
/// detail) a page shows; the rest is cut with `…`.
pub const CUT: usize = 300;

/// `s` with `&`, `<`, `>`, `"` and `'` escaped: safe in element content and in quoted
/// attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Controls (but tab and newline) say nothing a reader needs and confuse terminals
            // a page is copied into.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// `s` cut to `max` characters, with `…` when something was cut.
pub fn cut(s: &str, max: usize) -> String {
    let mut chars = s.chars();
    let mut out: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// `items` joined with `, `, or `none` when there are none.
pub fn joined_or<T: AsRef<str>>(items: &[T], none: &str) -> String {
    if items.is_empty() {
        none.to_string()
    } else {
        items
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `s` as a URL path segment or query value: everything but unreserved characters
/// percent-encoded.
pub fn url_part(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `html` with every link and form target the console wrote (`href="/…"`, `action="/…"`)
/// moved under `base` (`/console` when mounted by serve; `""` changes nothing). Only the
/// console's own markup can hold these: text from anywhere else went through [`escape`], which
/// leaves no `"` in it.
pub fn rebase(html: &str, base: &str) -> String {
    if base.is_empty() {
        return html.to_string();
    }
    html.replace("href=\"/", &format!("href=\"{base}/"))
        .replace("action=\"/", &format!("action=\"{base}/"))
}

/// A page being written. Tool-written text goes through [`Html::text`] (redacted, cut,
/// escaped); names and numbers the console made itself through [`Html::esc`] (escaped).
#[derive(Debug)]
pub struct Html<'r> {
    out: String,
    redactor: &'r Redactor,
}

impl<'r> Html<'r> {
    pub fn new(redactor: &'r Redactor) -> Html<'r> {
        Html {
            out: String::new(),
            redactor,
        }
    }

    /// Markup written in this crate.
    pub fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Text, escaped (not redacted nor cut: for what the console itself says).
    pub fn esc(&mut self, text: &str) -> &mut Self {
        self.out.push_str(&escape(text));
        self
    }

    /// Untrusted text (from a tool, the ledger, an error): every key value redacted, cut to
    /// `max` characters, escaped.
    pub fn text(&mut self, text: &str, max: usize) -> &mut Self {
        let redacted = self.redactor.redact(text);
        self.out.push_str(&escape(&cut(&redacted, max)));
        self
    }

    /// `<a href="HREF">text</a>` with `href` built by the console (escaped anyway).
    pub fn link(&mut self, href: &str, text: &str) -> &mut Self {
        let _ = write!(self.out, "<a href=\"{}\">", escape(href));
        self.text(text, CUT);
        self.out.push_str("</a>");
        self
    }

    /// A button that leads to the confirmation page of an action (a GET: nothing changes until
    /// the confirmation's POST).
    pub fn action(&mut self, label: &str, action: &str, params: &[(&str, &str)]) -> &mut Self {
        let mut href = format!("/confirm?action={}", url_part(action));
        for (k, v) in params {
            let _ = write!(href, "&{}={}", url_part(k), url_part(v));
        }
        let _ = write!(
            self.out,
            "<a class=\"button\" href=\"{}\">{}</a> ",
            escape(&href),
            escape(label)
        );
        self
    }

    /// Calls per day as a bar chart (see [`chart`]).
    pub fn chart(&mut self, days: &[(u64, u64)]) -> &mut Self {
        self.out.push_str(&chart(days));
        self
    }

    /// A number or a word the console made.
    pub fn show(&mut self, value: impl std::fmt::Display) -> &mut Self {
        self.esc(&value.to_string())
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// The page frame around `body`: title, navigation, the stylesheet (served by the console
/// itself), no script.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · autotool console</title>\
         <link rel=\"stylesheet\" href=\"/assets/console.css\"></head><body>\
         <nav><strong>autotool console</strong> <a href=\"/\">Library</a> \
         <a href=\"/consent\">Pending consent</a> <a href=\"/keys\">Keys</a></nav>\
         <main>{body}</main></body></html>\n",
        escape(title)
    )
}

/// Calls per day as a bar chart (inline SVG, no script, no style attribute): ok calls in one
/// colour, failures stacked on them in another.
pub fn chart(days: &[(u64, u64)]) -> String {
    const W: usize = 6;
    const GAP: usize = 2;
    const H: u64 = 60;
    let top = days.iter().map(|(c, _)| *c).max().unwrap_or(0).max(1);
    let width = days.len() * (W + GAP);
    let mut svg = format!(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{H}\" viewBox=\"0 0 {width} {H}\" role=\"img\" aria-label=\"calls per day, \
         last {} days\">",
        days.len()
    );
    for (i, (calls, failed)) in days.iter().enumerate() {
        let x = i * (W + GAP);
        let h = (calls * H).div_ceil(top);
        let fh = (failed.min(calls) * H).div_ceil(top);
        if h > 0 {
            let _ = write!(
                svg,
                "<rect class=\"ok\" x=\"{x}\" y=\"{}\" width=\"{W}\" height=\"{h}\"><title>{calls} calls, {failed} failed</title></rect>",
                H - h
            );
        }
        if fh > 0 {
            let _ = write!(
                svg,
                "<rect class=\"failed\" x=\"{x}\" y=\"{}\" width=\"{W}\" height=\"{fh}\"/>",
                H - fh
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn markup_in_text_is_escaped_and_long_text_cut() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(escape("a\u{1b}[31mb"), "a\u{fffd}[31mb");
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(url_part("a b/c?d=&é"), "a%20b%2Fc%3Fd%3D%26%C3%A9");
    }

    #[test]
    fn untrusted_text_is_redacted_cut_and_escaped() {
        let r = Redactor::new(&[("K", "s3cr3t-value")]).unwrap();
        let mut h = Html::new(&r);
        h.text("<b>s3cr3t-value</b>", 100);
        h.text(&"x".repeat(50), 10);
        let out = h.finish();
        assert_eq!(out, "&lt;b&gt;[REDACTED:K]&lt;/b&gt;xxxxxxxxxx…", "{out}");
    }

    #[test]
    fn a_mounted_console_s_links_move_under_its_base_and_text_does_not() {
        let r = Redactor::new::<&str, &str>(&[]).unwrap();
        let mut h = Html::new(&r);
        h.link("/tool/x", "x")
            .action("Pin", "pin", &[("tool", "x")])
            .raw("<form method=\"post\" action=\"/action\">")
            .text("<a href=\"/evil\">", 100);
        let html = page("t", &h.finish());
        let moved = rebase(&html, "/console");
        for link in [
            "href=\"/console/tool/x\"",
            "href=\"/console/confirm?action=pin&amp;tool=x\"",
            "action=\"/console/action\"",
            "href=\"/console/assets/console.css\"",
            "href=\"/console/\"",
        ] {
            assert!(moved.contains(link), "{link}: {moved}");
        }
        assert!(!moved.contains("href=\"/tool"), "{moved}");
        // Escaped text is left as it was.
        assert!(
            moved.contains("&lt;a href=&quot;/evil&quot;&gt;"),
            "{moved}"
        );
        assert_eq!(rebase(&html, ""), html);
    }

    #[test]
    fn the_chart_scales_to_its_busiest_day() {
        let svg = chart(&[(0, 0), (2, 1), (4, 0)]);
        assert_eq!(svg.matches("<rect class=\"ok\"").count(), 2);
        assert_eq!(svg.matches("<rect class=\"failed\"").count(), 1);
        assert!(svg.contains("height=\"60\"><title>4 calls"), "{svg}");
        assert!(svg.contains("height=\"30\"><title>2 calls"), "{svg}");
        assert!(!svg.contains("style="), "{svg}");
    }
}
