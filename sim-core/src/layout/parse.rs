//! Parsing XLA shape text (the HLO parser's grammar), with byte offsets in every error.

use super::error::LayoutError;
use super::types::{ArrayShape, Dim, Layout, PrimitiveType, Shape, SplitConfig, Tile, COMBINE_DIMENSION};
use super::validate::validate_shape;

/// Parses one shape (array, tuple, token or opaque) and validates it; the whole input must be used.
pub fn parse_shape(text: &str) -> Result<Shape, LayoutError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let shape = p.shape()?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.expected("end of input"));
    }
    validate_shape(&shape)?;
    Ok(shape)
}

/// Parses a shape at the start of `text` without requiring the whole input to be used.
/// Returns the shape and the number of bytes consumed. Not validated.
pub fn parse_shape_prefix(text: &str) -> Result<(Shape, usize), LayoutError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let shape = p.shape()?;
    Ok((shape, p.pos))
}

/// Deepest tuple nesting accepted, so hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn found(&self) -> String {
        if self.pos >= self.s.len() {
            return "end of input".to_string();
        }
        let end = (self.pos + 12).min(self.s.len());
        let excerpt = String::from_utf8_lossy(&self.s[self.pos..end]);
        format!("'{excerpt}'")
    }

    fn expected(&self, what: &str) -> LayoutError {
        LayoutError::Parse {
            offset: self.pos,
            expected: what.to_string(),
            found: self.found(),
        }
    }

    /// Skips white space and /* comments */ (the printer's /*index=N*/ markers).
    fn ws(&mut self) {
        loop {
            while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
            if self.s[self.pos..].starts_with(b"/*") {
                match self.s[self.pos + 2..].windows(2).position(|w| w == b"*/") {
                    Some(end) => self.pos += 2 + end + 2,
                    None => return,
                }
            } else {
                return;
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), LayoutError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{}'", c as char)))
        }
    }

    fn ident(&mut self) -> &str {
        self.ws();
        let start = self.pos;
        while self.pos < self.s.len() && (self.s[self.pos].is_ascii_alphanumeric() || self.s[self.pos] == b'_') {
            self.pos += 1;
        }
        std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("")
    }

    fn int(&mut self) -> Result<i64, LayoutError> {
        self.ws();
        let start = self.pos;
        if self.pos < self.s.len() && self.s[self.pos] == b'-' {
            self.pos += 1;
        }
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        if text.is_empty() || text == "-" {
            self.pos = start;
            return Err(self.expected("an integer"));
        }
        text.parse::<i64>().map_err(|_| {
            self.pos = start;
            LayoutError::Parse {
                offset: start,
                expected: "an integer that fits in 64 bits".into(),
                found: format!("'{text}'"),
            }
        })
    }

    fn shape(&mut self) -> Result<Shape, LayoutError> {
        if self.peek() == Some(b'(') {
            if self.depth >= MAX_DEPTH {
                return Err(self.expected("a tuple nested less deeply"));
            }
            self.depth += 1;
            self.pos += 1;
            let mut elems = Vec::new();
            if !self.eat(b')') {
                loop {
                    elems.push(self.shape()?);
                    if self.eat(b')') {
                        break;
                    }
                    if !self.eat(b',') {
                        return Err(self.expected("',' or ')' in a tuple"));
                    }
                }
            }
            self.depth -= 1;
            return Ok(Shape::Tuple(elems));
        }
        let start = self.pos;
        let name = self.ident().to_string();
        if name.is_empty() {
            return Err(self.expected("an element type (f32, bf16, s8, pred, ...) or '('"));
        }
        let Some(ty) = PrimitiveType::from_name(&name) else {
            self.pos = start;
            return Err(LayoutError::Parse {
                offset: start,
                expected: "an element type (f32, bf16, s8, pred, ...)".into(),
                found: format!("unknown type '{name}'"),
            });
        };
        self.expect(b'[')?;
        let mut dims = Vec::new();
        if !self.eat(b']') {
            loop {
                dims.push(self.dim()?);
                if self.eat(b']') {
                    break;
                }
                if !self.eat(b',') {
                    return Err(self.expected("',' or ']' after a dimension"));
                }
            }
        }
        match ty {
            PrimitiveType::Token | PrimitiveType::Opaque => {
                if !dims.is_empty() {
                    return Err(LayoutError::invalid(Some(start), format!("{name} takes no dimensions")));
                }
                return Ok(if ty == PrimitiveType::Token {
                    Shape::Token
                } else {
                    Shape::Opaque
                });
            }
            _ => {}
        }
        let layout = if self.peek() == Some(b'{') {
            Some(self.layout()?)
        } else {
            None
        };
        Ok(Shape::Array(ArrayShape {
            element_type: ty,
            dims,
            layout,
        }))
    }

    fn dim(&mut self) -> Result<Dim, LayoutError> {
        if self.eat(b'?') {
            return Ok(Dim::Unbounded);
        }
        self.ws();
        if self.s[self.pos..].starts_with(b"<=") {
            self.pos += 2;
            return Ok(Dim::Bounded(self.int()?));
        }
        Ok(Dim::Static(self.int()?))
    }

    fn int_list_until(&mut self, close: u8) -> Result<Vec<i64>, LayoutError> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(self.int()?);
            if self.eat(close) {
                return Ok(out);
            }
            if !self.eat(b',') {
                return Err(self.expected(&format!("',' or '{}'", close as char)));
            }
        }
    }

    fn layout(&mut self) -> Result<Layout, LayoutError> {
        self.expect(b'{')?;
        let mut layout = Layout::new(Vec::new());
        if self.peek().is_some_and(|c| c.is_ascii_digit() || c == b'-') {
            loop {
                layout.minor_to_major.push(self.int()?);
                if !self.eat(b',') {
                    break;
                }
            }
        }
        if self.eat(b':') {
            while self.peek().is_some_and(|c| c != b'}') {
                self.field(&mut layout)?;
            }
        }
        self.expect(b'}')?;
        Ok(layout)
    }

    fn paren_int(&mut self) -> Result<i64, LayoutError> {
        self.expect(b'(')?;
        let v = self.int()?;
        self.expect(b')')?;
        Ok(v)
    }

    fn paren_type(&mut self) -> Result<PrimitiveType, LayoutError> {
        self.expect(b'(')?;
        let start = self.pos;
        let name = self.ident().to_string();
        let ty = PrimitiveType::from_name(&name).ok_or_else(|| LayoutError::Parse {
            offset: start,
            expected: "an element type".into(),
            found: format!("'{name}'"),
        })?;
        self.expect(b')')?;
        Ok(ty)
    }

    fn field(&mut self, layout: &mut Layout) -> Result<(), LayoutError> {
        match self.peek() {
            Some(b'#') => {
                self.pos += 1;
                layout.index_primitive_type = Some(self.paren_type()?);
                return Ok(());
            }
            Some(b'*') => {
                self.pos += 1;
                layout.pointer_primitive_type = Some(self.paren_type()?);
                return Ok(());
            }
            _ => {}
        }
        let start = self.pos;
        let name = self.ident().to_string();
        match name.as_str() {
            "T" => {
                if self.peek() != Some(b'(') {
                    return Err(self.expected("'(' starting a tile"));
                }
                while self.peek() == Some(b'(') {
                    self.pos += 1;
                    let mut dims = Vec::new();
                    if !self.eat(b')') {
                        loop {
                            if self.eat(b'*') {
                                dims.push(COMBINE_DIMENSION);
                            } else {
                                dims.push(self.int()?);
                            }
                            if self.eat(b')') {
                                break;
                            }
                            if !self.eat(b',') {
                                return Err(self.expected("',' or ')' in a tile"));
                            }
                        }
                    }
                    layout.tiles.push(Tile { dims });
                }
            }
            "L" => layout.tail_padding_alignment_in_elements = self.paren_int()?,
            "E" => layout.element_size_in_bits = self.paren_int()?,
            "S" => layout.memory_space = self.paren_int()?,
            "M" => layout.dynamic_shape_metadata_prefix_bytes = self.paren_int()?,
            "SC" => {
                if self.peek() != Some(b'(') {
                    return Err(self.expected("'(' starting a split config"));
                }
                while self.eat(b'(') {
                    let dimension = self.int()?;
                    self.expect(b':')?;
                    let split_indices = self.int_list_until(b')')?;
                    layout.split_configs.push(SplitConfig {
                        dimension,
                        split_indices,
                    });
                }
            }
            "P" => {
                self.expect(b'(')?;
                let shape = self.shape()?;
                self.expect(b')')?;
                layout.physical_shape = Some(Box::new(shape));
            }
            "D" => {
                // Old dim-level-type field: accepted and dropped, as XLA's parser does.
                self.expect(b'(')?;
                let mut depth = 1;
                while depth > 0 {
                    match self.s.get(self.pos) {
                        None => return Err(self.expected("')' closing D(...)")),
                        Some(b'(') => depth += 1,
                        Some(b')') => depth -= 1,
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            _ => {
                self.pos = start;
                return Err(self.expected("a layout field (T, L, E, S, SC, P, M, #, *, D) or '}'"));
            }
        }
        Ok(())
    }
}
