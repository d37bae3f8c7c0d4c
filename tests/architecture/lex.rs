//! A small Rust lexer: enough to see code without its comments and literals, with line numbers.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An identifier or keyword (lifetimes too, with their quote).
    Ident,
    /// Punctuation; `::` is one token.
    Punct,
    /// A string, character or number literal.
    Lit,
}

/// One token and the 1-based line it starts on.
#[derive(Clone, Debug)]
pub struct Tok {
    /// The token's text (a string literal's text without quotes or escapes resolved).
    pub text: String,
    /// Its kind.
    pub kind: Kind,
    /// The line it starts on.
    pub line: usize,
}

impl Tok {
    /// Whether the token is this identifier.
    pub fn is(&self, ident: &str) -> bool {
        self.kind == Kind::Ident && self.text == ident
    }
    /// Whether the token is this punctuation.
    pub fn punct(&self, p: &str) -> bool {
        self.kind == Kind::Punct && self.text == p
    }
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: usize,
    out: Vec<Tok>,
}

/// The index of the brace closing the one at `open`, if the tokens close it.
pub fn closing_brace(toks: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.punct("{") {
            depth += 1;
        } else if t.punct("}") {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// The tokens of a source text, comments dropped.
pub fn tokens(src: &str) -> Vec<Tok> {
    let mut l = Lexer {
        chars: src.chars().collect(),
        i: 0,
        line: 1,
        out: Vec::new(),
    };
    while l.i < l.chars.len() {
        l.step();
    }
    l.out
}

fn ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl Lexer {
    fn at(&self, k: usize) -> char {
        self.chars.get(self.i + k).copied().unwrap_or('\0')
    }

    fn bump(&mut self) -> char {
        let c = self.at(0);
        if c == '\n' {
            self.line += 1;
        }
        self.i += 1;
        c
    }

    fn push(&mut self, text: String, kind: Kind, line: usize) {
        self.out.push(Tok { text, kind, line });
    }

    fn step(&mut self) {
        let c = self.at(0);
        let line = self.line;
        if c.is_whitespace() {
            self.bump();
        } else if c == '/' && self.at(1) == '/' {
            while self.i < self.chars.len() && self.at(0) != '\n' {
                self.bump();
            }
        } else if c == '/' && self.at(1) == '*' {
            self.block_comment();
        } else if c == '"' {
            let s = self.string();
            self.push(s, Kind::Lit, line);
        } else if c == '\'' {
            self.quote(line);
        } else if c.is_ascii_digit() {
            let mut s = String::new();
            while ident_char(self.at(0)) {
                s.push(self.bump());
            }
            self.push(s, Kind::Lit, line);
        } else if ident_char(c) {
            self.ident(line);
        } else if c == ':' && self.at(1) == ':' {
            self.i += 2;
            self.push("::".into(), Kind::Punct, line);
        } else {
            self.bump();
            self.push(c.to_string(), Kind::Punct, line);
        }
    }

    fn block_comment(&mut self) {
        let mut depth = 0usize;
        while self.i < self.chars.len() {
            if self.at(0) == '/' && self.at(1) == '*' {
                depth += 1;
                self.i += 2;
            } else if self.at(0) == '*' && self.at(1) == '/' {
                depth -= 1;
                self.i += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.bump();
            }
        }
    }

    /// A `"..."` literal from its opening quote; returns its text.
    fn string(&mut self) -> String {
        self.bump();
        let mut s = String::new();
        while self.i < self.chars.len() {
            match self.bump() {
                '\\' => s.push(self.bump()),
                '"' => break,
                c => s.push(c),
            }
        }
        s
    }

    /// `r"..."`, `r#"..."#`: from the first `#` or quote after the `r`.
    fn raw_string(&mut self) -> String {
        let mut hashes = 0;
        while self.at(0) == '#' {
            hashes += 1;
            self.bump();
        }
        self.bump();
        let mut s = String::new();
        while self.i < self.chars.len() {
            if self.at(0) == '"' && (1..=hashes).all(|k| self.at(k) == '#') {
                self.i += 1 + hashes;
                break;
            }
            s.push(self.bump());
        }
        s
    }

    /// A character literal (`'a'`, `'\n'`) or a lifetime (`'a`).
    fn quote(&mut self, line: usize) {
        if self.at(1) == '\\' {
            self.i += 2;
            while self.i < self.chars.len() && self.at(0) != '\'' {
                self.bump();
            }
            self.bump();
            self.push("'".into(), Kind::Lit, line);
        } else if self.at(2) == '\'' {
            self.i += 3;
            self.push("'".into(), Kind::Lit, line);
        } else {
            self.bump();
            let mut s = String::from("'");
            while ident_char(self.at(0)) {
                s.push(self.bump());
            }
            self.push(s, Kind::Ident, line);
        }
    }

    fn ident(&mut self, line: usize) {
        let mut s = String::new();
        while ident_char(self.at(0)) {
            s.push(self.bump());
        }
        let raw_prefix = s == "r" || s == "br" || s == "cr";
        if raw_prefix && (self.at(0) == '"' || (self.at(0) == '#' && matches!(self.at(1), '#' | '"'))) {
            let t = self.raw_string();
            self.push(t, Kind::Lit, line);
        } else if s == "r" && self.at(0) == '#' && ident_char(self.at(1)) {
            self.bump();
            let mut id = String::new();
            while ident_char(self.at(0)) {
                id.push(self.bump());
            }
            self.push(id, Kind::Ident, line);
        } else if (s == "b" || s == "c") && self.at(0) == '"' {
            let t = self.string();
            self.push(t, Kind::Lit, line);
        } else if s == "b" && self.at(0) == '\'' {
            self.quote(line);
        } else {
            self.push(s, Kind::Ident, line);
        }
    }
}
