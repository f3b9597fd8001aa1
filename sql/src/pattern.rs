//! IoTDB's path patterns (`root.sg.d1.*`, `root.sg.**`), as FROM, SHOW, COUNT and DELETE take
//! them, and how a series' path is matched against one.

/// An IoTDB path pattern (`root.sg.d1.*`, `root.sg.**`): path nodes, where a `*` node matches
/// exactly one node and a `**` node one or more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPattern {
    nodes: Vec<String>,
}

impl PathPattern {
    /// A pattern of `text`: `root` (any case) first, nodes separated by `.`, none empty; a node
    /// with a `*` must be `*` or `**`. `None` when it is not one.
    pub fn parse(text: &str) -> Option<PathPattern> {
        let mut nodes: Vec<String> = text.split('.').map(str::to_string).collect();
        if !nodes[0].eq_ignore_ascii_case("root") {
            return None;
        }
        nodes[0] = "root".to_string();
        let valid = nodes
            .iter()
            .all(|n| !n.is_empty() && (!n.contains('*') || n == "*" || n == "**"));
        valid.then_some(PathPattern { nodes })
    }

    /// The series a pattern without a wildcard names: (device, measurement), when it has a
    /// device of at least two nodes.
    pub fn as_series(&self) -> Option<(String, String)> {
        if self.has_wildcard() || self.nodes.len() < 3 {
            return None;
        }
        let (measurement, device) = self.nodes.split_last()?;
        Some((device.join("."), measurement.clone()))
    }

    /// True when a node is `*` or `**`.
    pub fn has_wildcard(&self) -> bool {
        self.nodes.iter().any(|n| n.starts_with('*'))
    }

    /// The nodes before the first wildcard, joined: every path the pattern matches starts with
    /// it.
    pub fn fixed_prefix(&self) -> String {
        self.nodes
            .iter()
            .take_while(|n| !n.starts_with('*'))
            .cloned()
            .collect::<Vec<_>>()
            .join(".")
    }

    /// Whether `path` matches. A pattern with a wildcard matches as IoTDB's does; one without
    /// matches the path itself and every path under it (`root.sg` lists `root.sg.d1.s1`, not
    /// `root.sg2.d1.s1`), as `root.sg.**` would plus the path itself.
    pub fn matches(&self, path: &str) -> bool {
        let path: Vec<&str> = path.split('.').collect();
        if !self.has_wildcard() {
            return path.len() >= self.nodes.len()
                && self.nodes.iter().zip(&path).all(|(n, p)| n == p);
        }
        // matched[j]: the pattern's first i nodes match the path's first j nodes.
        let mut matched = vec![false; path.len() + 1];
        matched[0] = true;
        for node in &self.nodes {
            let mut next = vec![false; path.len() + 1];
            for j in 1..=path.len() {
                next[j] = match node.as_str() {
                    "**" => matched[j - 1] || next[j - 1],
                    "*" => matched[j - 1],
                    literal => matched[j - 1] && literal == path[j - 1],
                };
            }
            matched = next;
        }
        matched[path.len()]
    }

    /// [`PathPattern::matches`] of the series `device.measurement`, without joining the path
    /// when the pattern has no `**` (a LAST over a pattern asks this of every series listed).
    pub fn matches_series(&self, device: &str, measurement: &str) -> bool {
        if !self.has_wildcard() || self.nodes.iter().any(|n| n == "**") {
            return self.matches(&format!("{device}.{measurement}"));
        }
        let mut path = device.split('.').chain(std::iter::once(measurement));
        self.nodes
            .iter()
            .all(|node| path.next().is_some_and(|p| node == "*" || node == p))
            && path.next().is_none()
    }
}

impl PathPattern {
    /// The pattern of `self`'s paths' children named `node` (`*` for any child).
    pub fn child(&self, node: &str) -> PathPattern {
        let mut nodes = self.nodes.clone();
        nodes.push(node.to_string());
        PathPattern { nodes }
    }

    /// The number of nodes, `root` included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never: a pattern has `root` at least.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

impl std::fmt::Display for PathPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.nodes.join("."))
    }
}

#[cfg(test)]
mod tests {
    use super::PathPattern;

    #[test]
    fn patterns_match_as_iotdb_does() {
        let p = |text: &str| PathPattern::parse(text).expect(text);
        assert!(p("root.sg.d1.*").matches("root.sg.d1.s1"));
        assert!(!p("root.sg.d1.*").matches("root.sg.d1.s1.x"));
        assert!(!p("root.sg.d1.*").matches("root.sg.d1"));
        assert!(p("root.sg.**").matches("root.sg.d1.s1"));
        assert!(p("root.sg.**").matches("root.sg.d1"));
        assert!(!p("root.sg.**").matches("root.sg"));
        assert!(!p("root.sg.**").matches("root.sg2.d1"));
        assert!(p("root.**.s1").matches("root.a.b.s1"));
        assert!(!p("root.**.s1").matches("root.a.b.s2"));
        assert!(p("root.*.d1.**").matches("root.x.d1.y.z"));
        // Without a wildcard: the path itself and what is under it, whole nodes only.
        assert!(p("ROOT.sg").matches("root.sg.d1.s1"));
        assert!(p("root.sg.d1.s1").matches("root.sg.d1.s1"));
        assert!(!p("root.sg").matches("root.sg2.d1.s1"));
        assert_eq!(p("root.sg.*.s1").fixed_prefix(), "root.sg");
        assert_eq!(p("root.sg.**").to_string(), "root.sg.**");
        for bad in ["sg.d1", "root..d1", "root.s*", "root.***", "root.d1."] {
            assert_eq!(PathPattern::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_series_matches_as_its_joined_path_does() {
        let patterns = [
            "root.sg.*.s1",
            "root.sg.*.*",
            "root.*",
            "root.sg.**",
            "root.sg",
            "root.*.d1.**",
        ];
        let series = [
            ("root.sg.d1", "s1"),
            ("root.sg.d1", "s2"),
            ("root.sg.d1.x", "s1"),
            ("root.sg2.d1", "s1"),
            ("root.sg", "s1"),
        ];
        for text in patterns {
            let p = PathPattern::parse(text).expect(text);
            for (device, measurement) in series {
                assert_eq!(
                    p.matches_series(device, measurement),
                    p.matches(&format!("{device}.{measurement}")),
                    "{text} and {device}.{measurement}"
                );
            }
        }
    }
}
