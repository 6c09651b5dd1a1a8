//! [`Layout`]: the structure of a call's arguments (or of its outputs) —
//! nested tuples, lists and dicts around tensor and scalar leaves — kept in
//! the key so that two calls with the same leaves in different structures
//! (two dicts with other keys, say) never share compiled code.
//!
//! A layout is a sequence of tokens, as a tree is written out: `(` `T` `{`
//! `a:` `T` `b:` `S` `}` `)`. Leaves are [`Leaf::Tensor`] (a tensor, or a
//! scalar passed at run time as a 0-d tensor) and [`Leaf::Static`] (a scalar
//! baked into the code). Flat calls, whose arguments are all tensors side by
//! side, need no layout at all.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHasher;

use crate::hashing::finalize;
use crate::hex;

/// A kind of container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[expect(
    clippy::exhaustive_enums,
    reason = "layout tokens are hashed into the cache key and written into keys' text: callers \
        that map their containers onto these match exhaustively, and a new container is a new key \
        format anyway"
)]
pub enum Container {
    /// A tuple: `(a, b)`.
    Tuple,
    /// A list: `[a, b]`.
    List,
    /// A dict: `{k: v}`, its entries in the order they were added (callers
    /// that take dicts from a map add them in key order).
    Dict,
}

impl Container {
    fn delimiters(self) -> (&'static str, &'static str) {
        match self {
            Container::Tuple => ("(", ")"),
            Container::List => ("[", "]"),
            Container::Dict => ("{", "}"),
        }
    }
}

/// A leaf of a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[expect(
    clippy::exhaustive_enums,
    reason = "layout tokens are hashed into the cache key and written into keys' text: callers \
        that lower a layout match every leaf, and a new leaf is a new key format anyway"
)]
pub enum Leaf {
    /// A tensor argument (or a scalar passed as a 0-d tensor): its dtype and
    /// dims are in the signature's `args`, in order.
    Tensor,
    /// A scalar baked into the compiled code: its value is in the
    /// signature's `statics`, in order.
    Static,
}

/// One token of a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Token {
    Open(Container),
    /// The key of the next entry of a dict.
    Key(Arc<str>),
    Leaf(Leaf),
    Close,
}

/// The structure of a call's arguments or outputs. Cheap to clone (shared);
/// its hash is computed once.
#[derive(Clone)]
pub struct Layout {
    tokens: Arc<[Token]>,
    hash: u64,
}

impl Layout {
    /// The number of leaves of each kind: `(tensors, statics)`.
    pub fn leaf_counts(&self) -> (usize, usize) {
        self.tokens
            .iter()
            .fold((0, 0), |(t, s), token| match token {
                Token::Leaf(Leaf::Tensor) => (t + 1, s),
                Token::Leaf(Leaf::Static) => (t, s + 1),
                _ => (t, s),
            })
    }

    /// The tree, visited in order: `visitor` is called for each container
    /// opened and closed, each dict key, and each leaf.
    pub fn visit(&self, visitor: &mut impl LayoutVisitor) {
        for token in self.tokens.iter() {
            match token {
                Token::Open(container) => visitor.open(*container),
                Token::Key(key) => visitor.key(key),
                Token::Leaf(leaf) => visitor.leaf(*leaf),
                Token::Close => visitor.close(),
            }
        }
    }

    pub(crate) fn precomputed_hash(&self) -> u64 {
        self.hash
    }

    /// The layout as one line of tokens separated by spaces, which
    /// [`from_token_text`](Self::from_token_text) reads back: `(`, `[` and
    /// `{` open a tuple, list or dict, `)` closes the innermost, `k<hex>` is
    /// the key of the next dict entry (its UTF-8 in lower-case hex), `T` a
    /// tensor leaf and `S` a static one: `T { k62 T k6b S )`.
    pub fn token_text(&self) -> String {
        let mut text = String::new();
        for (i, token) in self.tokens.iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            match token {
                Token::Open(Container::Tuple) => text.push('('),
                Token::Open(Container::List) => text.push('['),
                Token::Open(Container::Dict) => text.push('{'),
                Token::Close => text.push(')'),
                Token::Leaf(Leaf::Tensor) => text.push('T'),
                Token::Leaf(Leaf::Static) => text.push('S'),
                Token::Key(key) => {
                    text.push('k');
                    hex::encode_into(&mut text, key.as_bytes());
                }
            }
        }
        text
    }

    /// The layout whose [`token_text`](Self::token_text) is `text`; `None`
    /// for text that is not such a line, or whose tokens do not describe a
    /// tree (see [`LayoutBuilder::build`]).
    pub fn from_token_text(text: &str) -> Option<Layout> {
        let mut builder = LayoutBuilder::new();
        for token in text.split(' ') {
            match token {
                "(" => builder.open(Container::Tuple),
                "[" => builder.open(Container::List),
                "{" => builder.open(Container::Dict),
                ")" => builder.close(),
                "T" => builder.leaf(Leaf::Tensor),
                "S" => builder.leaf(Leaf::Static),
                key => {
                    let key = String::from_utf8(hex::decode(key.strip_prefix('k')?)?).ok()?;
                    builder.key(key)
                }
            };
        }
        builder.build().ok()
    }

    /// Writes the tree, rendering each leaf with `leaf`.
    pub(crate) fn render(
        &self,
        f: &mut fmt::Formatter<'_>,
        mut leaf: impl FnMut(&mut fmt::Formatter<'_>, Leaf) -> fmt::Result,
    ) -> fmt::Result {
        let mut open: Vec<Container> = Vec::new();
        // No separator before the first element of a level, nor between a
        // key and its value.
        let (mut first, mut after_key) = (true, false);
        for token in self.tokens.iter() {
            if !first && !after_key && !matches!(token, Token::Close) {
                f.write_str(", ")?;
            }
            (first, after_key) = (false, false);
            match token {
                Token::Open(container) => {
                    f.write_str(container.delimiters().0)?;
                    open.push(*container);
                    first = true;
                }
                Token::Key(key) => {
                    f.write_str(key)?;
                    f.write_str(": ")?;
                    after_key = true;
                }
                Token::Leaf(kind) => leaf(f, *kind)?,
                Token::Close => {
                    // A built layout is balanced; render `)` if it were not.
                    let container = open.pop().unwrap_or(Container::Tuple);
                    f.write_str(container.delimiters().1)?;
                }
            }
        }
        Ok(())
    }
}

/// What [`Layout::visit`] calls, in tree order.
pub trait LayoutVisitor {
    /// A container opens.
    fn open(&mut self, container: Container);
    /// The next entry of the innermost dict has this key.
    fn key(&mut self, key: &Arc<str>);
    /// A leaf.
    fn leaf(&mut self, leaf: Leaf);
    /// The innermost container closes.
    fn close(&mut self);
}

impl PartialEq for Layout {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && (Arc::ptr_eq(&self.tokens, &other.tokens) || self.tokens == other.tokens)
    }
}

impl Eq for Layout {}

impl Hash for Layout {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl fmt::Display for Layout {
    /// The structure with `T` for tensors and `S` for static scalars:
    /// `(T, {a: T, b: S})`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.render(f, |f, leaf| {
            f.write_str(match leaf {
                Leaf::Tensor => "T",
                Leaf::Static => "S",
            })
        })
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Layout({self})")
    }
}

/// Records a layout token by token. Unbalanced input is a caller's bug and
/// is reported by [`LayoutBuilder::build`], never a panic.
#[derive(Clone, Debug, Default)]
pub struct LayoutBuilder {
    tokens: Vec<Token>,
    open: Vec<Container>,
    /// A dict key was given and its value has not come yet.
    key_pending: bool,
    error: Option<LayoutError>,
}

/// A layout that does not describe a tree.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A container was closed that was never opened.
    #[error("a container was closed that was never opened")]
    UnbalancedClose,
    /// Containers were left open.
    #[error("{0} container(s) left open")]
    Unclosed(usize),
    /// A dict entry has no key, or a key is outside a dict, or a key has no
    /// value.
    #[error("dict entries need exactly one key each, inside a dict")]
    MisplacedKey,
}

impl LayoutBuilder {
    /// An empty layout (the top level is a sequence of elements).
    pub fn new() -> Self {
        Self::default()
    }

    /// True when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Opens a container.
    pub fn open(&mut self, container: Container) -> &mut Self {
        self.element();
        self.tokens.push(Token::Open(container));
        self.open.push(container);
        self
    }

    /// The key of the next dict entry.
    pub fn key(&mut self, key: impl Into<Arc<str>>) -> &mut Self {
        if self.open.last() != Some(&Container::Dict) || self.key_pending {
            self.fail(LayoutError::MisplacedKey);
        }
        self.key_pending = true;
        self.tokens.push(Token::Key(key.into()));
        self
    }

    /// A leaf.
    pub fn leaf(&mut self, leaf: Leaf) -> &mut Self {
        self.element();
        self.tokens.push(Token::Leaf(leaf));
        self
    }

    /// Closes the innermost container.
    pub fn close(&mut self) -> &mut Self {
        if self.key_pending {
            self.fail(LayoutError::MisplacedKey);
        }
        if self.open.pop().is_none() {
            self.fail(LayoutError::UnbalancedClose);
        }
        self.tokens.push(Token::Close);
        self
    }

    /// The layout, computing its hash; the builder is left empty.
    ///
    /// # Errors
    ///
    /// The first [`LayoutError`] of the recorded calls: a close without an
    /// open, a misplaced key, or containers left open.
    pub fn build(&mut self) -> Result<Layout, LayoutError> {
        let builder = std::mem::take(self);
        if let Some(error) = builder.error {
            return Err(error);
        }
        if !builder.open.is_empty() {
            return Err(LayoutError::Unclosed(builder.open.len()));
        }
        Ok(builder.build_unchecked())
    }

    /// The tokens recorded, as a layout, whether or not they describe a
    /// tree.
    pub(crate) fn build_unchecked(self) -> Layout {
        let mut h = FxHasher::default();
        self.tokens.hash(&mut h);
        Layout {
            hash: finalize(h.finish()),
            tokens: self.tokens.into(),
        }
    }

    /// Bookkeeping before an element (a container or a leaf).
    fn element(&mut self) {
        match (self.open.last(), self.key_pending) {
            (Some(Container::Dict), false) => self.fail(LayoutError::MisplacedKey),
            _ => self.key_pending = false,
        }
    }

    fn fail(&mut self, error: LayoutError) {
        self.error.get_or_insert(error);
    }

    /// Replaces the tokens recorded so far by `count` tensor leaves (a
    /// signature builder switches from flat to structured this way).
    pub(crate) fn tensors(count: usize) -> Self {
        LayoutBuilder {
            tokens: vec![Token::Leaf(Leaf::Tensor); count],
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(entries: &[(&str, Leaf)]) -> Layout {
        let mut b = LayoutBuilder::new();
        b.leaf(Leaf::Tensor).open(Container::Dict);
        for (key, leaf) in entries {
            b.key(*key).leaf(*leaf);
        }
        b.close().build().unwrap()
    }

    #[test]
    fn structure_and_keys_are_part_of_the_identity() {
        let a = dict(&[("b", Leaf::Tensor), ("w", Leaf::Tensor)]);
        assert_eq!(a, dict(&[("b", Leaf::Tensor), ("w", Leaf::Tensor)]));
        assert_ne!(a, dict(&[("b", Leaf::Tensor), ("x", Leaf::Tensor)]));
        assert_ne!(a, dict(&[("b", Leaf::Tensor), ("w", Leaf::Static)]));
        assert_eq!(a.to_string(), "T, {b: T, w: T}");
        assert_eq!(a.leaf_counts(), (3, 0));
    }

    #[test]
    fn nested_containers_render_with_their_delimiters() {
        let mut b = LayoutBuilder::new();
        b.open(Container::Tuple)
            .leaf(Leaf::Tensor)
            .open(Container::List)
            .leaf(Leaf::Tensor)
            .leaf(Leaf::Static)
            .close()
            .open(Container::Dict)
            .key("k")
            .open(Container::Tuple)
            .close()
            .close()
            .close();
        let layout = b.build().unwrap();
        assert_eq!(layout.to_string(), "(T, [T, S], {k: ()})");
        assert_eq!(layout.leaf_counts(), (2, 1));
    }

    #[test]
    fn token_text_round_trips_and_refuses_what_is_not_a_tree() {
        let mut b = LayoutBuilder::new();
        b.leaf(Leaf::Tensor)
            .open(Container::Dict)
            .key("b")
            .open(Container::List)
            .leaf(Leaf::Tensor)
            .close()
            .key("k\t")
            .leaf(Leaf::Static)
            .close()
            .open(Container::Tuple)
            .close();
        let layout = b.build().unwrap();
        let text = layout.token_text();
        assert_eq!(text, "T { k62 [ T ) k6b09 S ) ( )");
        assert_eq!(Layout::from_token_text(&text), Some(layout));
        for bad in [
            "",
            "T  T",
            "( T",
            ")",
            "{ T )",
            "{ kx T )",
            "{ k6 T )",
            "{ kff T )",
            "t",
        ] {
            assert_eq!(Layout::from_token_text(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn malformed_layouts_are_errors() {
        let mut b = LayoutBuilder::new();
        b.close();
        assert_eq!(b.build(), Err(LayoutError::UnbalancedClose));
        b.open(Container::Tuple);
        assert_eq!(b.build(), Err(LayoutError::Unclosed(1)));
        b.open(Container::Dict).leaf(Leaf::Tensor).close();
        assert_eq!(b.build(), Err(LayoutError::MisplacedKey));
        b.key("outside");
        assert_eq!(b.build(), Err(LayoutError::MisplacedKey));
        b.open(Container::Dict).key("k").close();
        assert_eq!(b.build(), Err(LayoutError::MisplacedKey));
        // The builder is reusable after an error.
        assert!(b.leaf(Leaf::Tensor).build().is_ok());
    }
}
