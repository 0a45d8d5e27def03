//! The layers of an operator crate, read from its source: which module imports which, and
//! whether every import points down the layer table that the crate's `lib.rs` documents.
//!
//! The table is the one place that names the layers. It is a Markdown table in `lib.rs`'s crate
//! docs whose first column is `layer` and whose second lists the modules of that layer, lowest
//! layer first:
//!
//! ```text
//! //! | layer | modules | what it holds |
//! //! | --- | --- | --- |
//! //! | 1. settings | [`config`] | flags and settings |
//! //! | 2. policy | [`approval`], [`upgrade`] | pure decisions |
//! ```
//!
//! A module belongs to the row that names it or its nearest named ancestor; each module named in
//! the table is one *unit* (a controller with its submodules is one unit). A module may import
//! its own layer or a lower one; an import of a higher layer is reported, and so is any circle
//! of imports between units. Every module of the crate must be in the table.
//!
//! Imports are read from the source text: `use` items (groups, renames, globs, `self`, `super`
//! and `crate` paths) and paths in code that start with `crate`, `super`, `self`, a child module
//! or a name a `use` bound to a module. A path through a re-export of another crate
//! (`pub use operatorkit::status;`) is not an import of the re-exporting module. Comments and
//! string literals are skipped.
//!
//! ```no_run
//! let krate = packaging::layers::Crate::read(std::path::Path::new("src")).unwrap();
//! let check = krate.check().unwrap();
//! assert!(check.upward.is_empty() && check.unit_circles.is_empty(), "{check}");
//! ```
//!
//! An operator's architecture test is [`assert_points_down`] on its `src`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// One module of the crate: a source file (`aws/stacks.rs` is `aws::stacks`; `lib.rs` is the
/// empty path).
#[derive(Debug, Clone)]
pub struct Module {
    /// The module path without `crate::`, segments joined by `::`.
    pub path: String,
    /// The file, relative to the crate's `src`.
    pub file: PathBuf,
    /// Its lines.
    pub lines: usize,
}

/// One row of the layer table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The layer's name as the table gives it.
    pub name: String,
    /// The module paths it names.
    pub modules: Vec<String>,
}

/// A crate's modules, their imports and its layer table.
#[derive(Debug, Clone)]
pub struct Crate {
    /// Every module of the library, by path.
    pub modules: BTreeMap<String, Module>,
    /// Imports between modules: (importer, imported), both module paths; an import of a
    /// module's own items is not listed.
    pub imports: BTreeSet<(String, String)>,
    /// The layer table of `lib.rs`, lowest first.
    pub layers: Vec<Layer>,
}

/// What [`Crate::check`] found.
#[derive(Debug, Clone, Default)]
pub struct Check {
    /// Imports of a higher layer: (importer, its layer, imported, its layer).
    pub upward: Vec<(String, String, String, String)>,
    /// Circles of imports between units (each circle's units, sorted).
    pub unit_circles: Vec<Vec<String>>,
    /// Circles of imports between files (each circle's modules, sorted), for the record: a
    /// controller's submodules may share its state with `super::`.
    pub file_circles: Vec<Vec<String>>,
}

/// Why a crate cannot be read or checked.
#[derive(Debug, thiserror::Error)]
pub enum LayersError {
    /// A source file cannot be read.
    #[error("reading {0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// `lib.rs` has no layer table.
    #[error("lib.rs documents no layer table: add a `| layer | modules | ... |` table to its crate docs")]
    NoTable,
    /// A module is in no row of the table.
    #[error("module `{0}` is in no layer: name it (or an ancestor) in lib.rs's layer table")]
    Unplaced(String),
    /// The table names a module that does not exist.
    #[error("lib.rs's layer table names `{0}`, which is no module of the crate")]
    Unknown(String),
}

impl Crate {
    /// Reads the library under `src` (`main.rs` and `bin/` are binaries of it and are left out).
    pub fn read(src: &Path) -> Result<Crate, LayersError> {
        let mut files = Vec::new();
        collect(src, src, &mut files)?;
        let mut modules = BTreeMap::new();
        let mut texts = BTreeMap::new();
        for file in files {
            let Some(path) = module_path(&file) else { continue };
            let text = std::fs::read_to_string(src.join(&file)).map_err(|e| LayersError::Io(src.join(&file), e))?;
            modules.insert(path.clone(), Module { path: path.clone(), file, lines: text.lines().count() });
            texts.insert(path, text);
        }
        let lib = texts.get("").ok_or(LayersError::NoTable)?;
        let layers = layer_table(lib);
        let known: BTreeSet<String> = modules.keys().cloned().collect();
        let scanned: BTreeMap<String, Scan> =
            texts.iter().map(|(path, text)| (path.clone(), scan(path, &strip(text)))).collect();
        let reexports: BTreeMap<String, BTreeMap<String, Target>> = scanned
            .iter()
            .map(|(m, s)| {
                (m.clone(), s.reexports.iter().map(|(n, p)| (n.clone(), resolve_target(p, &known))).collect())
            })
            .collect();
        let mut imports = BTreeSet::new();
        for (module, scan) in &scanned {
            for path in &scan.paths {
                if let Some(target) = resolve(path, &known, &reexports, 0)
                    && target != *module
                    && !target.is_empty()
                {
                    imports.insert((module.clone(), target));
                }
            }
        }
        Ok(Crate { modules, imports, layers })
    }

    /// The table row and unit a module belongs to: its own entry or its nearest ancestor's.
    fn place(&self, module: &str) -> Option<(usize, String)> {
        let mut best: Option<(usize, &str)> = None;
        for (i, layer) in self.layers.iter().enumerate() {
            for unit in &layer.modules {
                let inside = module == unit || unit.is_empty() || module.starts_with(&format!("{unit}::"));
                if inside && best.is_none_or(|(_, b)| unit.len() > b.len()) {
                    best = Some((i, unit));
                }
            }
        }
        best.map(|(i, u)| (i, u.to_string()))
    }

    /// Checks every import against the layer table and looks for circles.
    pub fn check(&self) -> Result<Check, LayersError> {
        if self.layers.is_empty() {
            return Err(LayersError::NoTable);
        }
        for unit in self.layers.iter().flat_map(|l| &l.modules) {
            if !self.modules.contains_key(unit) {
                return Err(LayersError::Unknown(unit.clone()));
            }
        }
        let mut place = BTreeMap::new();
        for module in self.modules.keys().filter(|m| !m.is_empty()) {
            place.insert(module.clone(), self.place(module).ok_or_else(|| LayersError::Unplaced(module.clone()))?);
        }
        let mut check = Check::default();
        let mut unit_edges = BTreeSet::new();
        for (from, to) in &self.imports {
            let (Some((fl, fu)), Some((tl, tu))) = (place.get(from), place.get(to)) else { continue };
            if tl > fl {
                check.upward.push((
                    from.clone(),
                    self.layers[*fl].name.clone(),
                    to.clone(),
                    self.layers[*tl].name.clone(),
                ));
            }
            if fu != tu {
                unit_edges.insert((fu.clone(), tu.clone()));
            }
        }
        check.unit_circles = circles(&unit_edges);
        check.file_circles = circles(&self.imports);
        Ok(check)
    }

    /// The `n` largest files, largest first.
    pub fn largest(&self, n: usize) -> Vec<&Module> {
        let mut all: Vec<&Module> = self.modules.values().collect();
        all.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.path.cmp(&b.path)));
        all.truncate(n);
        all
    }
}

/// The body of an operator's architecture test: read the crate whose sources are below `src`,
/// print its figures (the imports running up, the circles, the five largest files), and panic
/// when a module imports a layer above its own in the table, or units import each other in a
/// circle.
pub fn assert_points_down(src: &Path) {
    let krate = Crate::read(src).unwrap_or_else(|e| panic!("{e}"));
    let check = krate.check().unwrap_or_else(|e| panic!("{e}"));
    println!("{check}");
    println!("largest files:");
    for module in krate.largest(5) {
        println!("  {} {}", module.file.display(), module.lines);
    }
    assert!(check.upward.is_empty(), "a module imports a layer below it in lib.rs's table:\n{check}");
    assert!(check.unit_circles.is_empty(), "modules import each other in a circle:\n{check}");
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let in_circles: BTreeSet<&String> = self.file_circles.iter().flatten().collect();
        writeln!(f, "imports of a higher layer: {}", self.upward.len())?;
        for (from, fl, to, tl) in &self.upward {
            writeln!(f, "  {from} ({fl}) imports {to} ({tl})")?;
        }
        writeln!(f, "circles between units: {}", self.unit_circles.len())?;
        for c in &self.unit_circles {
            writeln!(f, "  {}", c.join(" <-> "))?;
        }
        writeln!(f, "files in circles: {} in {} circles", in_circles.len(), self.file_circles.len())?;
        for c in &self.file_circles {
            writeln!(f, "  {}", c.join(" <-> "))?;
        }
        Ok(())
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LayersError> {
    let entries = std::fs::read_dir(dir).map_err(|e| LayersError::Io(dir.to_path_buf(), e))?;
    for entry in entries {
        let path = entry.map_err(|e| LayersError::Io(dir.to_path_buf(), e))?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

/// `aws/stacks.rs` → `aws::stacks`, `aws/mod.rs` → `aws`, `lib.rs` → ``; binaries → None.
fn module_path(file: &Path) -> Option<String> {
    let mut parts: Vec<String> = file.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.first().is_some_and(|p| p == "bin") || parts == ["main.rs"] {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if stem != "mod" && !(parts.is_empty() && stem == "lib") {
        parts.push(stem.to_string());
    }
    Some(parts.join("::"))
}

/// The rows of the `| layer | modules | ... |` table in a file's `//!` docs.
fn layer_table(lib: &str) -> Vec<Layer> {
    let mut layers = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.trim().strip_prefix("//!") else {
            inside = false;
            continue;
        };
        let cells: Vec<&str> = doc.trim().trim_matches('|').split('|').map(str::trim).collect();
        if !doc.trim().starts_with('|') {
            inside = false;
        } else if cells.first().is_some_and(|c| c.eq_ignore_ascii_case("layer")) {
            inside = true;
        } else if inside && !cells[0].starts_with("---") && cells.len() >= 2 {
            let modules = cells[1]
                .split(',')
                .filter_map(|m| {
                    let m = m.trim().trim_matches(|c| c == '[' || c == ']' || c == '`').trim_start_matches("crate::");
                    (!m.is_empty()).then(|| m.to_string())
                })
                .collect();
            layers.push(Layer { name: cells[0].to_string(), modules });
        }
    }
    layers
}

/// The text with comments, string and character literals blanked (line breaks kept).
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#')) && !ident_before(&c, i) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            while j < c.len() {
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, c[j]);
                j += 1;
            }
            i = j;
            out.push(' ');
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                }
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push(' ');
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(' ');
            } else {
                out.push(c[i]);
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn ident_before(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Path,
    Punct(char),
}

fn tokens(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphabetic() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            out.push(Token::Ident(word.strip_prefix("r#").unwrap_or(&word).to_string()));
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push(Token::Path);
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            out.push(Token::Punct(c[i]));
            i += 1;
        }
    }
    out
}

/// What a module's text refers to: absolute candidate paths (segments from the crate root) and
/// the names it re-exports (`pub use`), each with its absolute path (or `None` for another crate).
#[derive(Debug, Default)]
struct Scan {
    paths: Vec<Vec<String>>,
    reexports: Vec<(String, Option<Vec<String>>)>,
}

fn split(module: &str) -> Vec<String> {
    if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_string).collect() }
}

fn scan(module: &str, text: &str) -> Scan {
    let toks = tokens(text);
    let mut scan = Scan::default();
    // The inline modules (`mod tests { … }`) open at each brace depth.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    // Names bound to modules: children declared with `mod`, and `use` items.
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    let here = |inline: &Vec<(usize, String)>| {
        let mut p = split(module);
        p.extend(inline.iter().map(|(_, n)| n.clone()));
        p
    };
    while i < toks.len() {
        match &toks[i] {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                while inline.last().is_some_and(|(d, _)| *d > depth) {
                    inline.pop();
                }
            }
            Token::Ident(w) if w == "mod" => {
                if let Some(Token::Ident(name)) = toks.get(i + 1) {
                    let mut child = here(&inline);
                    child.push(name.clone());
                    names.insert(name.clone(), child);
                    if toks.get(i + 2) == Some(&Token::Punct('{')) {
                        depth += 1;
                        inline.push((depth, name.clone()));
                        i += 3;
                        continue;
                    }
                }
            }
            Token::Ident(w) if w == "use" => {
                let public = i > 0 && matches!(&toks[i - 1], Token::Ident(p) if p == "pub")
                    || i > 3
                        && toks[i - 1] == Token::Punct(')')
                        && matches!(&toks[i - 4], Token::Ident(p) if p == "pub");
                let mut j = i + 1;
                let mut leaves = Vec::new();
                use_tree(&toks, &mut j, Vec::new(), &mut leaves);
                let base = here(&inline);
                for (path, bound) in leaves {
                    let absolute = absolute(&path, &base, &names);
                    if let Some(abs) = &absolute {
                        scan.paths.push(abs.clone());
                    }
                    if let Some(bound) = bound {
                        if public {
                            scan.reexports.push((bound.clone(), absolute.clone()));
                        }
                        match absolute {
                            Some(abs) => names.insert(bound, abs),
                            None => names.remove(&bound),
                        };
                    }
                }
                i = j;
                continue;
            }
            Token::Ident(first) if toks.get(i + 1) == Some(&Token::Path) && !(i > 0 && toks[i - 1] == Token::Path) => {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Token::Path) {
                    match toks.get(j + 1) {
                        Some(Token::Ident(seg)) => path.push(seg.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                if let Some(abs) = absolute(&path, &here(&inline), &names) {
                    scan.paths.push(abs);
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// Reads one use tree from `toks[*j]` up to its end; each leaf is (full path, the name it binds).
fn use_tree(toks: &[Token], j: &mut usize, prefix: Vec<String>, leaves: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix;
    loop {
        match toks.get(*j) {
            Some(Token::Path) => *j += 1,
            Some(Token::Ident(seg)) if seg == "as" => {
                *j += 1;
                let bound = match toks.get(*j) {
                    Some(Token::Ident(n)) if n != "_" => Some(n.clone()),
                    _ => None,
                };
                *j += 1;
                leaves.push((path, bound));
                return;
            }
            Some(Token::Ident(seg)) => {
                if seg == "self" && !path.is_empty() {
                    *j += 1;
                    let bound = path.last().cloned();
                    leaves.push((path, bound));
                    return;
                }
                path.push(seg.clone());
                *j += 1;
            }
            Some(Token::Punct('*')) => {
                *j += 1;
                leaves.push((path, None));
                return;
            }
            Some(Token::Punct('{')) => {
                *j += 1;
                while *j < toks.len() && toks[*j] != Token::Punct('}') {
                    use_tree(toks, j, path.clone(), leaves);
                    if toks.get(*j) == Some(&Token::Punct(',')) {
                        *j += 1;
                    }
                }
                *j += 1;
                if toks.get(*j) == Some(&Token::Punct(';')) {
                    *j += 1;
                }
                return;
            }
            Some(Token::Punct(';')) | Some(Token::Punct(',')) | Some(Token::Punct('}')) | None => {
                if matches!(toks.get(*j), Some(Token::Punct(';'))) {
                    *j += 1;
                }
                let bound = path.last().cloned();
                leaves.push((path, bound));
                return;
            }
            Some(_) => {
                *j += 1;
            }
        }
    }
}

/// A path as written in `base` → segments from the crate root, or `None` if it names another
/// crate or a local item.
fn absolute(path: &[String], base: &[String], names: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut abs = match first.as_str() {
        "crate" => Vec::new(),
        "self" => base.to_vec(),
        "super" => {
            let mut b = base.to_vec();
            b.pop();
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                b.pop();
                rest = &rest[1..];
            }
            b.extend(rest.iter().cloned());
            return Some(b);
        }
        name => names.get(name)?.clone(),
    };
    abs.extend(rest.iter().cloned());
    Some(abs)
}

#[derive(Debug, Clone)]
enum Target {
    External,
    Internal(Vec<String>),
}

fn resolve_target(path: &Option<Vec<String>>, _known: &BTreeSet<String>) -> Target {
    match path {
        None => Target::External,
        Some(p) => Target::Internal(p.clone()),
    }
}

/// The module a path lands in: its longest prefix that is a module, following re-exports.
fn resolve(
    path: &[String],
    known: &BTreeSet<String>,
    reexports: &BTreeMap<String, BTreeMap<String, Target>>,
    hops: usize,
) -> Option<String> {
    for len in (0..=path.len()).rev() {
        let module = path[..len].join("::");
        if !known.contains(&module) {
            continue;
        }
        if let Some(next) = path.get(len)
            && let Some(target) = reexports.get(&module).and_then(|r| r.get(next))
        {
            return match target {
                Target::External => None,
                Target::Internal(to) if hops < 8 => {
                    let mut full = to.clone();
                    full.extend(path[len + 1..].iter().cloned());
                    resolve(&full, known, reexports, hops + 1)
                }
                Target::Internal(_) => Some(module),
            };
        }
        return Some(module);
    }
    None
}

/// The circles (strongly connected parts of more than one node) of a graph, each sorted.
fn circles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    let index: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let names: Vec<&String> = nodes.iter().copied().collect();
    let mut next = vec![Vec::new(); names.len()];
    for (a, b) in edges {
        next[index[a]].push(index[b]);
    }
    // Tarjan's algorithm, iterative.
    let n = names.len();
    let (mut idx, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut counter, mut out) = (Vec::new(), 0, Vec::new());
    for root in 0..n {
        if idx[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if *child == 0 && idx[v] == usize::MAX {
                idx[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = next[v].get(*child) {
                *child += 1;
                if idx[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == idx[v] {
                let mut part = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    part.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    out.push(part);
                }
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(module: &str, text: &str) -> Vec<String> {
        scan(module, &strip(text)).paths.iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn use_items_and_code_paths_are_read() {
        let text = r#"
            use crate::aws::{self, stacks::{Gate, Progress as P}, cloudformation::*};
            use super::lookup;
            // use crate::commented::out;
            fn f() { let s = "crate::in_a_string"; lookup::component(); aws::s3::put(); crate::x::y(); }
            mod tests { use super::*; use crate::z; }
        "#;
        assert_eq!(
            paths("controllers::drift", text),
            [
                "aws",
                "aws::stacks::Gate",
                "aws::stacks::Progress",
                "aws::cloudformation",
                "controllers::lookup",
                "controllers::lookup::component",
                "aws::s3::put",
                "x::y",
                "controllers::drift",
                "z"
            ]
        );
    }

    #[test]
    fn circles_are_found() {
        let edges: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(circles(&edges), [["a", "b", "c"]]);
    }

    #[test]
    fn the_table_is_read() {
        let lib = "//! | layer | modules | what |\n//! | --- | --- | --- |\n//! | 1. low | [`config`], `aws` | x |\n//! | 2. high | [`crate::controllers::drift`] | y |\n";
        assert_eq!(
            layer_table(lib),
            [
                Layer { name: "1. low".into(), modules: vec!["config".into(), "aws".into()] },
                Layer { name: "2. high".into(), modules: vec!["controllers::drift".into()] },
            ]
        );
    }
}
