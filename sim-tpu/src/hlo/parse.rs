//! The HLO text reader: whole modules as XLA prints them, with a line and column on every error.
//!
//! Bounded: attribute values and literals are scanned, not interpreted (so large constants cost one pass), tuple
//! and brace nesting is capped, and every index is checked, so no byte input panics.

use std::collections::HashMap;

use sim_core::layout::{parse_shape_prefix, LayoutError};

use super::ir::{Attr, Computation, HloModule, Instruction, Operands};
use super::HloError;

/// Deepest bracket nesting accepted inside attribute values and literals.
const MAX_NESTING: usize = 10_000;

/// Debug sections of `--xla_dump_to` files, skipped up to the next blank line.
const SECTIONS: &[&str] = &["FileNames", "FunctionNames", "FileLocations", "StackFrames"];

/// Parses a whole module.
pub fn parse_module(text: &str) -> Result<HloModule, HloError> {
    let blanked = blank_comments(text.as_bytes())?;
    // Only whole comments (ASCII delimiters) were blanked, so the text is still UTF-8.
    let blanked = String::from_utf8(blanked).map_err(|_| HloError::Unsupported("text is not UTF-8".into()))?;
    let mut p = Parser {
        s: blanked.as_bytes(),
        t: &blanked,
        pos: 0,
        lines: line_starts(blanked.as_bytes()),
        calls: Vec::new(),
    };
    p.module()
}

/// Replaces `/* ... */` comments outside strings with spaces (keeping byte offsets, so columns stay right).
fn blank_comments(s: &[u8]) -> Result<Vec<u8>, HloError> {
    let mut out = s.to_vec();
    let mut i = 0;
    let mut in_str = false;
    while i < s.len() {
        let c = s[i];
        if in_str {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
        } else if c == b'"' {
            in_str = true;
            i += 1;
        } else if c == b'/' && s.get(i + 1) == Some(&b'*') {
            let start = i;
            let end = s[i + 2..].windows(2).position(|w| w == b"*/").map(|e| i + 2 + e + 2);
            let end = match end {
                Some(e) => e,
                None => {
                    let lines = line_starts(s);
                    let (line, column) = line_col(&lines, start);
                    return Err(HloError::Parse {
                        line,
                        column,
                        expected: "`*/` closing this comment".into(),
                        found: "end of input".into(),
                    });
                }
            };
            for b in &mut out[start..end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    Ok(out)
}

fn line_starts(s: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(s.iter().enumerate().filter(|(_, &c)| c == b'\n').map(|(i, _)| i + 1));
    v
}

/// 1-based line and column (in characters) of byte `pos`.
fn line_col(lines: &[usize], pos: usize) -> (usize, usize) {
    let line = lines.partition_point(|&l| l <= pos).max(1);
    (line, pos.saturating_sub(lines[line - 1]) + 1)
}

struct Parser<'a> {
    s: &'a [u8],
    /// The same text as `s`.
    t: &'a str,
    pos: usize,
    lines: Vec<usize>,
    /// Computation names that attributes refer to, with where: checked once all computations are read.
    calls: Vec<(String, usize)>,
}

/// An operand reference awaiting resolution: name and where it was written.
struct PendingRef {
    name: String,
    pos: usize,
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'%' | b'$')
}

impl Parser<'_> {
    fn at(&self, pos: usize) -> (usize, usize) {
        line_col(&self.lines, pos)
    }

    fn found(&self) -> String {
        if self.pos >= self.s.len() {
            return "end of input".into();
        }
        let end = (self.pos + 16).min(self.s.len());
        let t = String::from_utf8_lossy(&self.s[self.pos..end]);
        let t = t.split('\n').next().unwrap_or("");
        format!("`{t}`")
    }

    fn err(&self, expected: &str) -> HloError {
        let (line, column) = self.at(self.pos);
        HloError::Parse {
            line,
            column,
            expected: expected.into(),
            found: self.found(),
        }
    }

    fn err_at(&self, pos: usize, message: String) -> HloError {
        let (line, column) = self.at(pos);
        HloError::Invalid { line, column, message }
    }

    /// Skips spaces and tabs (not newlines).
    fn sp(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\r') {
            self.pos += 1;
        }
    }

    /// Skips all white space.
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        self.sp();
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), HloError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(&format!("`{}`", c as char)))
        }
    }

    fn word(&mut self) -> String {
        self.sp();
        let start = self.pos;
        while self.pos < self.s.len() && is_name_byte(self.s[self.pos]) {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.pos]).into_owned()
    }

    fn name(&mut self, what: &str) -> Result<String, HloError> {
        let w = self.word();
        let w = w.strip_prefix('%').unwrap_or(&w).to_string();
        if w.is_empty() {
            return Err(self.err(what));
        }
        Ok(w)
    }

    fn text(&self, a: usize, b: usize) -> String {
        String::from_utf8_lossy(&self.s[a..b]).into_owned()
    }

    /// Scans a balanced value (brackets and strings) up to a `,`, `)` or newline at depth 0, or `stop_at_brace`
    /// `{` for signatures; returns its text.
    fn balanced(&mut self, stop_on_close_paren: bool) -> Result<String, HloError> {
        let start = self.pos;
        let mut stack: Vec<u8> = Vec::new();
        while self.pos < self.s.len() {
            let c = self.s[self.pos];
            match c {
                b'"' => {
                    let open = self.pos;
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            None => {
                                self.pos = open;
                                return Err(self.err("a closing `\"` for this string"));
                            }
                            Some(b'\\') => self.pos += 2,
                            Some(b'"') => {
                                self.pos += 1;
                                break;
                            }
                            Some(_) => self.pos += 1,
                        }
                    }
                    continue;
                }
                b'{' | b'(' | b'[' => {
                    if stack.len() >= MAX_NESTING {
                        return Err(self.err("brackets nested less deeply"));
                    }
                    stack.push(c);
                }
                b'}' | b')' | b']' => {
                    if stack.is_empty() {
                        if c == b')' && stop_on_close_paren {
                            break;
                        }
                        if c == b'}' {
                            break;
                        }
                        return Err(self.err("a value with balanced brackets"));
                    }
                    let open = stack.pop().unwrap_or(b'(');
                    let want = match open {
                        b'{' => b'}',
                        b'(' => b')',
                        _ => b']',
                    };
                    if c != want {
                        return Err(self.err(&format!("`{}`", want as char)));
                    }
                }
                b',' | b'\n' if stack.is_empty() => break,
                _ => {}
            }
            self.pos += 1;
        }
        if !stack.is_empty() {
            return Err(self.err("closing brackets"));
        }
        Ok(self.text(start, self.pos).trim_end().to_string())
    }

    /// `, key=value` pairs up to the end of the line.
    fn attrs(&mut self) -> Result<Vec<Attr>, HloError> {
        let mut out = Vec::new();
        loop {
            self.sp();
            match self.peek() {
                None | Some(b'\n') => return Ok(out),
                Some(b',') => self.pos += 1,
                _ => return Err(self.err("`,` before the next attribute, or the end of the line")),
            }
            self.sp();
            let key = self.word();
            if key.is_empty() {
                return Err(self.err("an attribute name"));
            }
            self.expect(b'=')?;
            self.sp();
            let value_pos = self.pos;
            let value = self.balanced(false)?;
            if value.is_empty() {
                return Err(self.err("an attribute value"));
            }
            if matches!(
                key.as_str(),
                "to_apply" | "calls" | "condition" | "body" | "branch_computations"
            ) {
                for n in value.trim_matches(|c| c == '{' || c == '}').split(',') {
                    let n = n.trim().trim_start_matches('%');
                    if !n.is_empty() {
                        self.calls.push((n.to_string(), value_pos));
                    }
                }
            }
            out.push(Attr { key, value });
        }
    }

    fn module(&mut self) -> Result<HloModule, HloError> {
        self.ws();
        let kw = self.word();
        if kw != "HloModule" {
            self.pos = 0;
            self.ws();
            return Err(self.err("`HloModule` at the start of the text"));
        }
        let name = self.name("a module name")?;
        let attrs = self.attrs()?;
        let mut sections = Vec::new();
        let mut computations: Vec<Computation> = Vec::new();
        let mut entry = None;
        loop {
            self.ws();
            if self.pos >= self.s.len() {
                break;
            }
            let save = self.pos;
            let w = self.word();
            if SECTIONS.contains(&w.as_str()) {
                self.pos = save;
                sections.push(self.section());
                continue;
            }
            self.pos = save;
            let comp_pos = self.pos;
            let c = self.computation()?;
            if computations.iter().any(|x| x.name == c.name) {
                return Err(self.err_at(comp_pos, format!("computation `{}` is defined twice", c.name)));
            }
            if c.is_entry {
                if entry.is_some() {
                    return Err(self.err_at(comp_pos, "a second ENTRY computation".into()));
                }
                entry = Some(computations.len());
            }
            computations.push(c);
        }
        // Without an ENTRY marker XLA takes the last computation.
        let entry = match entry {
            Some(e) => e,
            None if !computations.is_empty() => computations.len() - 1,
            None => return Err(self.err("a computation")),
        };
        let module = HloModule {
            name,
            attrs,
            sections,
            computations,
            entry,
        };
        self.check_calls(&module)?;
        Ok(module)
    }

    fn section(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while self.pos < self.s.len() {
            let end = self.s[self.pos..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(self.s.len(), |e| self.pos + e);
            let line = self.text(self.pos, end);
            self.pos = (end + 1).min(self.s.len());
            if line.trim().is_empty() {
                break;
            }
            lines.push(line.trim_end().to_string());
        }
        lines
    }

    fn computation(&mut self) -> Result<Computation, HloError> {
        let mut w = self.word();
        let is_entry = w == "ENTRY";
        if is_entry {
            w = self.word();
        }
        let name = w.strip_prefix('%').unwrap_or(&w).to_string();
        if name.is_empty() {
            return Err(self.err("a computation name"));
        }
        self.sp();
        let signature = if self.peek() == Some(b'(') {
            let start = self.pos;
            // `(params) -> shape`, up to the opening brace.
            let mut depth = 0usize;
            while let Some(c) = self.peek() {
                match c {
                    b'(' | b'[' => depth += 1,
                    b')' | b']' => depth = depth.saturating_sub(1),
                    // A result layout `{1,0}` follows `]`; the body brace follows a space.
                    b'{' if depth == 0 && self.pos > start && self.s[self.pos - 1] == b' ' => break,
                    b'\n' => return Err(self.err("`{` opening the computation body")),
                    _ => {}
                }
                self.pos += 1;
            }
            Some(self.text(start, self.pos).trim_end().to_string())
        } else {
            None
        };
        self.expect(b'{')?;
        let mut instructions: Vec<Instruction> = Vec::new();
        let mut pending: Vec<Vec<PendingRef>> = Vec::new();
        let mut root = None;
        let mut names: HashMap<String, usize> = HashMap::new();
        loop {
            self.ws();
            match self.peek() {
                None => return Err(self.err("`}` closing the computation")),
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => {}
            }
            let ins_pos = self.pos;
            let (ins, refs, is_root) = self.instruction()?;
            if names.insert(ins.name.clone(), instructions.len()).is_some() {
                return Err(self.err_at(ins_pos, format!("instruction `{}` is defined twice", ins.name)));
            }
            if is_root {
                if root.is_some() {
                    return Err(self.err_at(ins_pos, "a second ROOT instruction".into()));
                }
                root = Some(instructions.len());
            }
            instructions.push(ins);
            pending.push(refs);
        }
        let attrs = self.attrs()?;
        if instructions.is_empty() {
            return Err(self.err(&format!("instructions in computation `{name}`")));
        }
        // Resolve operand names.
        for (i, refs) in pending.iter().enumerate() {
            if refs.is_empty() {
                continue;
            }
            let mut ids = Vec::with_capacity(refs.len());
            for r in refs {
                let id = names.get(&r.name).copied().ok_or_else(|| {
                    self.err_at(
                        r.pos,
                        format!("operand `{}` is not defined in computation `{name}`", r.name),
                    )
                })?;
                ids.push(id);
            }
            instructions[i].operands = Operands::Refs(ids);
        }
        let root = root.unwrap_or(instructions.len() - 1);
        let (instructions, root) = topo_order(instructions, root).map_err(|i| {
            self.err_at(
                pending[i].first().map_or(0, |r| r.pos),
                format!("instruction {} in `{name}` depends on itself", i),
            )
        })?;
        Ok(Computation {
            name,
            is_entry,
            signature,
            instructions,
            root,
            attrs,
        })
    }

    fn instruction(&mut self) -> Result<(Instruction, Vec<PendingRef>, bool), HloError> {
        let start = self.pos;
        let mut w = self.word();
        let is_root = w == "ROOT";
        if is_root {
            w = self.word();
        }
        let name = w.strip_prefix('%').unwrap_or(&w).to_string();
        if name.is_empty() {
            return Err(self.err("an instruction name"));
        }
        self.expect(b'=')?;
        self.sp();
        let shape_pos = self.pos;
        let rest = self.t.get(self.pos..).ok_or_else(|| self.err("UTF-8 text"))?;
        let (shape, used) = parse_shape_prefix(rest).map_err(|e| match e {
            LayoutError::Parse {
                offset,
                expected,
                found,
            } => {
                let (line, column) = self.at(shape_pos + offset);
                HloError::Parse {
                    line,
                    column,
                    expected: format!("a shape: {expected}"),
                    found,
                }
            }
            other => self.err_at(shape_pos, format!("bad shape: {other}")),
        })?;
        self.pos = shape_pos + used;
        let opcode = self.word();
        if opcode.is_empty()
            || !opcode
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            return Err(self.err("an opcode"));
        }
        self.expect(b'(')?;
        let mut refs = Vec::new();
        let operands = match opcode.as_str() {
            "parameter" => {
                self.sp();
                let p = self.pos;
                let w = self.word();
                let n = w.parse::<u64>().map_err(|_| {
                    self.err_at(p, format!("parameter number must be a non-negative integer, got `{w}`"))
                })?;
                Operands::Parameter(n)
            }
            "constant" => {
                self.sp();
                let lit = self.balanced(true)?;
                Operands::Literal(lit)
            }
            _ => {
                loop {
                    self.ws();
                    if self.peek() == Some(b')') {
                        break;
                    }
                    if !refs.is_empty() {
                        self.expect(b',')?;
                        self.ws();
                    }
                    // An operand may carry its shape (`f32[2]{0} %x`): the name is the last word.
                    let start = self.pos;
                    let text = self.balanced(true)?;
                    let last = text.split_whitespace().last().unwrap_or("");
                    let n = last.strip_prefix('%').unwrap_or(last);
                    if n.is_empty() || !n.bytes().all(is_name_byte) {
                        self.pos = start;
                        return Err(self.err("an operand name"));
                    }
                    refs.push(PendingRef {
                        name: n.to_string(),
                        pos: start + text.len() - last.len(),
                    });
                }
                Operands::Refs(Vec::new())
            }
        };
        self.expect(b')')?;
        let attrs = self.attrs()?;
        let ins = Instruction {
            name,
            shape,
            opcode,
            operands,
            attrs,
        };
        // Collectives' groups and shardings are checked here, where the line is known.
        super::collective::validate(&ins)
            .and_then(|_| super::sharding::validate(&ins))
            .map_err(|e| self.err_at(start, format!("instruction `{}`: {e}", ins.name)))?;
        Ok((ins, refs, is_root))
    }

    /// Every computation an attribute names must exist.
    fn check_calls(&self, m: &HloModule) -> Result<(), HloError> {
        for (name, pos) in &self.calls {
            if m.computation(name).is_none() {
                return Err(self.err_at(*pos, format!("`{name}` names no computation of the module")));
            }
        }
        Ok(())
    }
}

/// Orders instructions so operands come first (stable: text order when it already is), remapping operand
/// indices; `Err(i)` names an instruction on a cycle.
fn topo_order(ins: Vec<Instruction>, root: usize) -> Result<(Vec<Instruction>, usize), usize> {
    let n = ins.len();
    let in_order = ins
        .iter()
        .enumerate()
        .all(|(i, x)| x.operand_ids().iter().all(|&o| o < i));
    if in_order {
        return Ok((ins, root));
    }
    let mut indeg = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, x) in ins.iter().enumerate() {
        for &o in x.operand_ids() {
            indeg[i] += 1;
            users[o].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if order.len() < n {
        return Err((0..n).find(|&i| indeg[i] > 0).unwrap_or(0));
    }
    let mut new_of = vec![0; n];
    for (new, &old) in order.iter().enumerate() {
        new_of[old] = new;
    }
    let mut slots: Vec<Option<Instruction>> = ins.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(n);
    for &old in &order {
        let mut x = slots[old].take().ok_or(old)?;
        if let Operands::Refs(r) = &mut x.operands {
            for o in r.iter_mut() {
                *o = new_of[*o];
            }
        }
        out.push(x);
    }
    Ok((out, new_of[root]))
}
