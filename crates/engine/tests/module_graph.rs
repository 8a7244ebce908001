//! The engine's files form layers: no circle of `use`s between them (issue 30). Each file under
//! `crates/engine/src` is a node; an edge goes from a file to every file whose module a path in it names:
//! `use` trees and paths in the code alike, through `crate::`, `$crate::`, `super::`, `self::`, a child module
//! declared in the file, or a name a `use` of the file brought in. A path ends at the deepest module that is
//! a file (`crate::protocols::pulsar::payload::PayloadSection` is `protocols/pulsar/payload.rs`); a name the
//! crate root re-exports or an exported macro goes to the file that defines it. Comments and string literals
//! are not code. Every file is a node of its own; a circle is allowed only inside one module's folder (a
//! `mod.rs` and the files beside it using each other: one module split into files), never across folders
//! or among the top-level files.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One source file: its path under `src/` and its module path (`protocols/pulsar/mod.rs` is
/// `["protocols", "pulsar"]`, `lib.rs` is `[]`).
struct SourceFile {
    name: String,
    module: Vec<String>,
    tokens: Vec<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a Rust file as tokens: identifiers (with `$crate` as one), `::` and single punctuation;
/// comments, string and char literals and numbers left out.
fn tokens(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or('\0');
        if c == '/' && next == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (c == 'r' || c == 'b') && (next == '#' || (next == '"' && c == 'r') || (c == 'b' && next == 'r')) {
            // raw strings r"..", r#".."#, br#".."#; b".." is handled as `b` then a string
            let mut j = i + 1 + usize::from(c == 'b' && next == 'r');
            let hashes = chars[j..].iter().take_while(|&&h| h == '#').count();
            j += hashes;
            if chars.get(j) != Some(&'"') {
                out.push(c.to_string());
                i += 1;
                continue;
            }
            j += 1;
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            while j < chars.len() && !chars[j..].iter().take(close.len()).copied().eq(close.chars()) {
                j += 1;
            }
            i = j + close.len();
        } else if c == '\'' {
            // a char literal ('x', '\n', '\u{..}'), else a lifetime
            if next == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && ident(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while i < chars.len()
                && (ident(chars[i]) || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
        } else if ident(c) || (c == '$' && ident(next)) {
            let start = i;
            i += 1;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && next == ':' {
            out.push("::".into());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Parse a `use` tree starting at `tokens[*at]` with `prefix`: every path it names, with the name each binds
/// (None for a glob or `_`).
fn use_tree(tokens: &[String], at: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix;
    loop {
        match tokens.get(*at).map(String::as_str) {
            Some("{") => {
                *at += 1;
                while tokens.get(*at).is_some_and(|t| t != "}") {
                    use_tree(tokens, at, path.clone(), out);
                    if tokens.get(*at).is_some_and(|t| t == ",") {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            Some("*") => {
                *at += 1;
                out.push((path, None));
                return;
            }
            Some(t) if is_ident(t) => {
                let segment = t.to_owned();
                *at += 1;
                if segment != "self" || path.is_empty() {
                    path.push(segment);
                }
                if tokens.get(*at).is_some_and(|t| t == "::") {
                    *at += 1;
                    continue;
                }
                let mut bound = path.last().cloned();
                if tokens.get(*at).is_some_and(|t| t == "as") {
                    bound = tokens.get(*at + 1).filter(|t| *t != "_").cloned();
                    *at += 2;
                }
                out.push((path, bound));
                return;
            }
            _ => return,
        }
    }
}

fn is_ident(token: &str) -> bool {
    token.starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '$')
}

/// A path a `use` names: (path, the name it binds, the module it is written in, whether it is `pub`).
type UseItem = (Vec<String>, Option<String>, Vec<String>, bool);

/// The crate's modules: module path → file name.
struct Crate {
    files: Vec<SourceFile>,
    modules: BTreeMap<Vec<String>, usize>,
    /// Exported macros (`#[macro_export]`, at the crate root) → the file defining them.
    macros: BTreeMap<String, usize>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        paths.sort();
        let mut files = Vec::new();
        for path in paths {
            let name = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            let mut module: Vec<String> = name.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            files.push(SourceFile { name, module, tokens: tokens(&fs::read_to_string(&path).unwrap()) });
        }
        let modules = files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
        let mut macros = BTreeMap::new();
        for (i, file) in files.iter().enumerate() {
            for w in file.tokens.windows(6) {
                if w[0] == "macro_export" && w[2] == "macro_rules" && w[3] == "!" {
                    macros.insert(w[4].clone(), i);
                }
            }
        }
        Crate { files, modules, macros }
    }

    /// The file an absolute path (after `crate`) ends in.
    fn file_of(&self, path: &[String], root_aliases: &BTreeMap<String, Vec<String>>, depth: usize) -> usize {
        for n in (1..=path.len()).rev() {
            if let Some(&file) = self.modules.get(&path[..n]) {
                return file;
            }
        }
        let root = self.modules[&Vec::new()];
        match path.first() {
            Some(first) if depth < 8 => match (root_aliases.get(first), self.macros.get(first)) {
                (Some(target), _) => {
                    let mut full = target.clone();
                    full.extend(path[1..].iter().cloned());
                    self.file_of(&full, root_aliases, depth + 1)
                }
                (None, Some(&file)) => file,
                (None, None) => root,
            },
            _ => root,
        }
    }

    /// The absolute paths (after `crate`) a file names, and the names its crate-root `pub use`s re-export.
    fn paths(&self, file: &SourceFile) -> (Vec<Vec<String>>, BTreeMap<String, Vec<String>>) {
        let t = &file.tokens;
        let children: BTreeSet<&str> =
            t.windows(3).filter(|w| w[0] == "mod" && is_ident(&w[1]) && w[2] == ";").map(|w| w[1].as_str()).collect();
        // the module each token is in: the file's, or an inline `mod name { ... }` within it
        let mut scope: Vec<(Vec<String>, usize)> = vec![(file.module.clone(), 0)];
        let mut depth = 0;
        let mut uses: Vec<UseItem> = Vec::new();
        let mut raw: Vec<(Vec<String>, Vec<String>)> = Vec::new(); // (path, module)
        let mut i = 0;
        while i < t.len() {
            let module = scope.last().unwrap().0.clone();
            match t[i].as_str() {
                "{" => depth += 1,
                "}" => {
                    if scope.len() > 1 && scope.last().unwrap().1 == depth {
                        scope.pop();
                    }
                    depth -= 1;
                }
                "mod" if t.get(i + 2).is_some_and(|b| b == "{") => {
                    let mut inner = module.clone();
                    inner.push(t[i + 1].clone());
                    depth += 1;
                    scope.push((inner, depth));
                    i += 3;
                    continue;
                }
                "use" => {
                    let public = i > 0 && (t[i - 1] == "pub" || t[i - 1] == ")");
                    let mut at = i + 1;
                    let mut found = Vec::new();
                    use_tree(t, &mut at, Vec::new(), &mut found);
                    uses.extend(found.into_iter().map(|(p, b)| (p, b, module.clone(), public)));
                    i = at;
                    continue;
                }
                token if is_ident(token) && t.get(i + 1).is_some_and(|c| c == "::") && (i == 0 || t[i - 1] != "::") => {
                    let mut path = vec![token.to_owned()];
                    let mut at = i + 1;
                    while t.get(at).is_some_and(|c| c == "::") && t.get(at + 1).is_some_and(|s| is_ident(s)) {
                        path.push(t[at + 1].clone());
                        at += 2;
                    }
                    raw.push((path, module));
                    i = at;
                    continue;
                }
                // `crate::name!` is a path; `name!` alone is resolved through the `use`s below
                token if is_ident(token) && t.get(i + 1).is_some_and(|c| c == "!") && (i == 0 || t[i - 1] != "::") => {
                    raw.push((vec![token.to_owned()], module));
                }
                _ => {}
            }
            i += 1;
        }
        // a path's first segment: crate, super, self, a child module or a name a `use` bound
        let bound: BTreeMap<String, Vec<String>> = uses
            .iter()
            .filter_map(|(p, b, m, _)| Some((b.clone()?, absolute(p, m, &children, &BTreeMap::new())?)))
            .collect();
        let mut out = Vec::new();
        let mut root_aliases = BTreeMap::new();
        for (path, b, module, public) in &uses {
            let Some(full) = absolute(path, module, &children, &BTreeMap::new()) else { continue };
            if file.module.is_empty() && *public {
                // the crate root's re-exports are names for other files' items, not its own uses
                if let Some(b) = b {
                    root_aliases.insert(b.clone(), full);
                }
                continue;
            }
            out.push(full);
        }
        for (path, module) in &raw {
            if let Some(full) = absolute(path, module, &children, &bound) {
                out.push(full);
            }
        }
        (out, root_aliases)
    }
}

/// `path`, written in `module` (whose file declares the child modules `children`, and whose `use`s bound
/// `bound`), from the crate root; None when it leaves the crate (std, other crates) or names nothing known.
fn absolute(
    path: &[String],
    module: &[String],
    children: &BTreeSet<&str>,
    bound: &BTreeMap<String, Vec<String>>,
) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    let mut base: Vec<String> = match first {
        "crate" | "$crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            return Some(base);
        }
        child if children.contains(child) => {
            let mut base = module.to_vec();
            base.push(child.to_owned());
            base.extend(path[1..].iter().cloned());
            return Some(base);
        }
        name => {
            let mut base = bound.get(name)?.clone();
            base.extend(path[1..].iter().cloned());
            return Some(base);
        }
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
}

/// The strongly connected components of more than one node (Tarjan's algorithm), each sorted.
fn circles(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct State<'e> {
        edges: &'e [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Each file's edges to the other files it uses.
fn graph(krate: &Crate) -> Vec<BTreeSet<usize>> {
    let mut root_aliases = BTreeMap::new();
    let all: Vec<_> = krate.files.iter().map(|f| krate.paths(f)).collect();
    for (_, aliases) in &all {
        root_aliases.extend(aliases.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    all.iter()
        .enumerate()
        .map(|(i, (paths, _))| {
            paths.iter().map(|p| krate.file_of(p, &root_aliases, 0)).filter(|&target| target != i).collect()
        })
        .collect()
}

/// Whether a circle stays inside one module's folder (a `mod.rs` and the files beside it, not the crate root):
/// a module and its submodules using each other is Rust's way of splitting one module into files, not a tie
/// between layers. A circle through two folders, or through the crate's top-level files, is one.
fn within_one_folder(krate: &Crate, component: &[usize]) -> bool {
    let folder = |v: usize| krate.files[v].name.rsplit_once('/').map(|(folder, _)| folder.to_owned());
    let first = folder(component[0]);
    first.is_some() && component.iter().all(|&v| folder(v) == first)
}

/// The shortest cycle within `component` that leaves a folder (its files in order, the first not repeated).
fn crossing_cycle(krate: &Crate, edges: &[BTreeSet<usize>], component: &[usize]) -> Vec<usize> {
    let mut best: Option<Vec<usize>> = None;
    for &start in component {
        // breadth first from `start` back to it, within the component
        let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closing = None;
        while let Some(v) = queue.pop_front() {
            if let Some(&w) = edges[v].iter().find(|&&w| w == start) {
                closing = Some((v, w));
                break;
            }
            for &w in edges[v].iter().filter(|w| component.contains(w)) {
                if w != start && !came_from.contains_key(&w) {
                    came_from.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        let Some((mut v, _)) = closing else { continue };
        let mut cycle = vec![v];
        while v != start {
            v = came_from[&v];
            cycle.push(v);
        }
        cycle.reverse();
        if !within_one_folder(krate, &cycle) && best.as_ref().is_none_or(|b| cycle.len() < b.len()) {
            best = Some(cycle);
        }
    }
    best.unwrap_or_else(|| component.to_vec())
}

fn engine_src() -> PathBuf {
    // ENGINE_SRC: another tree's sources (to see the check fail on a tree that has a circle)
    std::env::var_os("ENGINE_SRC").map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), PathBuf::from)
}

#[test]
fn the_engines_files_use_each_other_without_a_circle() {
    let krate = Crate::read(&engine_src());
    let edges = graph(&krate);
    // a parser gone wrong must not pass on nothing
    assert!(krate.files.len() > 40 && edges.iter().map(BTreeSet::len).sum::<usize>() > 150);
    let found: Vec<Vec<usize>> = circles(&edges).into_iter().filter(|c| !within_one_folder(&krate, c)).collect();
    let shown: Vec<String> = found
        .iter()
        .map(|component| {
            let lines: Vec<String> = component
                .iter()
                .map(|&v| {
                    let uses: Vec<&str> = edges[v]
                        .iter()
                        .filter(|w| component.contains(w))
                        .map(|&w| krate.files[w].name.as_str())
                        .collect();
                    format!("  {} uses {}", krate.files[v].name, uses.join(", "))
                })
                .collect();
            let names: Vec<&str> =
                crossing_cycle(&krate, &edges, component).iter().map(|&v| krate.files[v].name.as_str()).collect();
            format!(
                "a circle of {} files, e.g. {} -> {}:\n{}",
                component.len(),
                names.join(" -> "),
                names[0],
                lines.join("\n")
            )
        })
        .collect();
    assert!(found.is_empty(), "{}", shown.join("\n"));
}

#[test]
fn the_check_finds_paths_of_every_form() {
    let t = tokens(
        "use crate::a::{self, b::C as D, e::*};\n use super::f; // crate::comment::x\n \
         let s = \"crate::string::x\"; let c = 'x'; fn g<'a>() { crate::h::i(); child::j(); D::k(); }\n mod child;",
    );
    let file = SourceFile { name: "m/n.rs".into(), module: vec!["m".into(), "n".into()], tokens: t };
    let krate = Crate { files: Vec::new(), modules: BTreeMap::new(), macros: BTreeMap::new() };
    let (paths, _) = krate.paths(&file);
    let shown: BTreeSet<String> = paths.iter().map(|p| p.join("::")).collect();
    let expected = ["a", "a::b::C", "a::e", "m::f", "h::i", "m::n::child::j", "a::b::C::k"];
    assert_eq!(shown, expected.iter().map(|s| s.to_string()).collect());
    let edges = vec![BTreeSet::from([1]), BTreeSet::from([2]), BTreeSet::from([0]), BTreeSet::from([0])];
    assert_eq!(circles(&edges), vec![vec![0, 1, 2]]);
}
