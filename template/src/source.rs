//! Where in the template text a node came from.

use std::fmt;

/// A 1-based line and column in the template source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl Location {
    pub fn at(line: usize, column: usize) -> Self {
        Location { line, column }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// JSON pointer → source location, filled for YAML templates. JSON templates carry
/// the pointer alone. Kept as a list in document order: it is written for
/// every node of every template but read only when an error is reported, so
/// recording must be cheap and a lookup may scan.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    /// Every recorded pointer, one after the other: a 10,000-resource
    /// template records ~100,000 nodes, and one string each was a tenth of
    /// its parse.
    pointers: String,
    /// Each record: where its pointer ends in `pointers` (it starts where
    /// the one before ends), and its location.
    locations: Vec<(usize, Location)>,
    /// For a front end that renamed pointers (HOT): each renamed pointer
    /// and the one in the text, so an error names the path as written.
    originals: Vec<(String, String)>,
}

impl SourceMap {
    pub fn insert(&mut self, pointer: &str, location: Location) {
        self.pointers.push_str(pointer);
        self.locations.push((self.pointers.len(), location));
    }

    /// Each record's pointer and location, in document order.
    fn records(&self) -> impl Iterator<Item = (&str, Location)> {
        let mut start = 0;
        self.locations.iter().map(move |&(end, location)| {
            let pointer = &self.pointers[start..end];
            start = end;
            (pointer, location)
        })
    }

    /// The same locations under pointers rewritten by `f` (a front end that
    /// renames sections).
    pub fn translated(self, f: impl Fn(&str) -> String) -> SourceMap {
        let mut out = SourceMap::default();
        for (p, l) in self.records() {
            let renamed = f(p);
            if renamed != p {
                out.originals.push((renamed.clone(), p.to_string()));
            }
            out.insert(&renamed, l);
        }
        out
    }

    /// The pointer as written in the text, for a pointer of the renamed
    /// form: its nearest renamed ancestor's original, then the rest without
    /// the front end's internal functions (`Fn::Heat::…`).
    pub fn original(&self, pointer: &str) -> Option<String> {
        if self.originals.is_empty() {
            return None;
        }
        let mut p = pointer;
        loop {
            if let Some((_, original)) = self.originals.iter().find(|(k, _)| k == p) {
                let mut out = original.clone();
                for seg in pointer[p.len()..].split('/').filter(|s| !s.is_empty()) {
                    if !seg.starts_with("Fn::Heat::") {
                        out.push('/');
                        out.push_str(seg);
                    }
                }
                return Some(out);
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return None,
            }
        }
    }

    /// The location of `pointer` (its first record), or of its nearest
    /// recorded ancestor.
    pub fn get(&self, pointer: &str) -> Option<Location> {
        let mut p = pointer;
        loop {
            if let Some((_, l)) = self.records().find(|(k, _)| *k == p) {
                return Some(l);
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return None,
            }
        }
    }
}

/// Appends one segment to a JSON pointer, escaping `~` and `/`.
pub fn child(pointer: &str, segment: &str) -> String {
    let mut s = String::with_capacity(pointer.len() + segment.len() + 1);
    s.push_str(pointer);
    push_segment(&mut s, segment);
    s
}

/// Appends one segment to `pointer` in place, escaping `~` and `/`.
pub fn push_segment(pointer: &mut String, segment: &str) {
    pointer.push('/');
    if segment.contains(['~', '/']) {
        pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    } else {
        pointer.push_str(segment);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pointer_finds_its_own_location_or_its_nearest_recorded_ancestors() {
        let mut map = SourceMap::default();
        map.insert("", Location::at(1, 1));
        map.insert("/Resources", Location::at(2, 1));
        map.insert("/Resources/A", Location::at(3, 3));
        map.insert("/Resources/A/Type", Location::at(3, 10));
        map.insert("/Resources/B", Location::at(4, 3));
        assert_eq!(map.get("/Resources/A/Type"), Some(Location::at(3, 10)));
        assert_eq!(map.get("/Resources/B"), Some(Location::at(4, 3)));
        assert_eq!(
            map.get("/Resources/B/Properties/X"),
            Some(Location::at(4, 3))
        );
        assert_eq!(map.get("/Outputs"), Some(Location::at(1, 1)));
        let renamed = map.translated(|p| p.replace("/Resources", "/resources"));
        assert_eq!(renamed.get("/resources/A"), Some(Location::at(3, 3)));
        assert_eq!(renamed.get("/Resources/A"), Some(Location::at(1, 1)));
        assert_eq!(
            renamed.original("/resources/B/x").as_deref(),
            Some("/Resources/B/x")
        );
    }
}
