//! Atoms (int, float, string, bool) and their operations with Python semantics.
//!
//! The reference interpreter is Python, so `/` is true division, `%` takes the sign of the
//! divisor, `round` rounds half to even, `==` between numbers of different types compares
//! values (`1 == 1.0 == True`), `and`/`or` return an operand, and ordering a string against a
//! number is a type error. Integers are 64-bit: overflow is an error, never a wrap.

use crate::ast::{BinOp, Cmp};
use std::cmp::Ordering;
use std::fmt;

#[derive(Clone, Debug)]
pub enum Atom {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

/// An error from an atom operation: the message only; callers add the place.
#[derive(Clone, Debug, PartialEq)]
pub struct OpError(pub String);

pub type OpResult = Result<Atom, OpError>;

fn err<T>(msg: impl Into<String>) -> Result<T, OpError> {
    Err(OpError(msg.into()))
}

/// The longest string `*` may build, to keep hostile programs from exhausting memory.
pub const MAX_STRING: usize = 1 << 20;

impl Atom {
    pub fn type_name(&self) -> &'static str {
        match self {
            Atom::Int(_) => "int",
            Atom::Float(_) => "float",
            Atom::Str(_) => "string",
            Atom::Bool(_) => "bool",
        }
    }

    pub fn is_str(&self) -> bool {
        matches!(self, Atom::Str(_))
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Atom::Int(i) => *i != 0,
            Atom::Float(f) => *f != 0.0,
            Atom::Str(s) => !s.is_empty(),
            Atom::Bool(b) => *b,
        }
    }

    /// Numeric view: bools are 0/1 as in Python. `None` for strings.
    fn num(&self) -> Option<Num> {
        match self {
            Atom::Int(i) => Some(Num::I(*i)),
            Atom::Bool(b) => Some(Num::I(*b as i64)),
            Atom::Float(f) => Some(Num::F(*f)),
            Atom::Str(_) => None,
        }
    }

    /// The integer an int or a bool is in Python (`True` is 1); None for floats and strings.
    pub fn as_int(&self) -> Option<i64> {
        match self.num() {
            Some(Num::I(i)) => Some(i),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        self.num().map(|n| n.f())
    }

    /// Python `==`.
    pub fn py_eq(&self, other: &Atom) -> bool {
        match (self, other) {
            (Atom::Str(a), Atom::Str(b)) => a == b,
            (Atom::Str(_), _) | (_, Atom::Str(_)) => false,
            _ => match (self.num(), other.num()) {
                (Some(Num::I(a)), Some(Num::I(b))) => a == b,
                (Some(a), Some(b)) => a.f() == b.f() && int_float_exact(a, b),
                _ => false,
            },
        }
    }

    /// Python ordering; `Err` for string vs number.
    pub fn py_cmp(&self, other: &Atom) -> Result<Option<Ordering>, OpError> {
        match (self, other) {
            (Atom::Str(a), Atom::Str(b)) => Ok(Some(a.cmp(b))),
            (Atom::Str(_), _) | (_, Atom::Str(_)) => err(format!("cannot order {} and {} ({} vs {})", self.type_name(), other.type_name(), self.repr(), other.repr())),
            _ => {
                let (Some(a), Some(b)) = (self.num(), other.num()) else {
                    return err(format!("cannot order {} and {}", self.repr(), other.repr()));
                };
                Ok(match (a, b) {
                    (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
                    // Python compares an int and a float exactly (2^53 + 1 > 2^53 as a float).
                    (Num::I(x), Num::F(y)) => int_float_cmp(x, y),
                    (Num::F(x), Num::I(y)) => int_float_cmp(y, x).map(Ordering::reverse),
                    _ => a.f().partial_cmp(&b.f()),
                })
            }
        }
    }

    /// Applies a `select` comparison `key op query`.
    pub fn compare(key: &Atom, cmp: Cmp, query: &Atom) -> Result<bool, OpError> {
        Ok(match cmp {
            Cmp::Eq => key.py_eq(query),
            Cmp::Ne => !key.py_eq(query),
            Cmp::Lt => key.py_cmp(query)? == Some(Ordering::Less),
            Cmp::Le => matches!(key.py_cmp(query)?, Some(Ordering::Less | Ordering::Equal)),
            Cmp::Gt => key.py_cmp(query)? == Some(Ordering::Greater),
            Cmp::Ge => matches!(key.py_cmp(query)?, Some(Ordering::Greater | Ordering::Equal)),
        })
    }

    /// Python `repr`, as the reference prints values.
    pub fn repr(&self) -> String {
        match self {
            Atom::Int(i) => i.to_string(),
            Atom::Float(f) => float_repr(*f),
            Atom::Str(s) => str_repr(s),
            Atom::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        }
    }

    /// Python `str()`.
    pub fn to_py_str(&self) -> String {
        match self {
            Atom::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Atom::Int(i) => serde_json::Value::from(*i),
            Atom::Float(f) => serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, serde_json::Value::Number),
            Atom::Str(s) => serde_json::Value::String(s.clone()),
            Atom::Bool(b) => serde_json::Value::Bool(*b),
        }
    }

    /// One value of an s-op's value set: of the same type, and the same dict key (so 0.0 and
    /// -0.0 are one value; 0 and 0.0 are two). What the compiler's value sets hold apart.
    pub fn same_value(&self, other: &Atom) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && self.key() == other.key()
    }

    /// A key under which Python would consider two atoms the same dict key.
    pub fn key(&self) -> AtomKey {
        match self {
            Atom::Str(s) => AtomKey::Str(s.clone()),
            Atom::Bool(b) => AtomKey::Int(*b as i64),
            Atom::Int(i) => AtomKey::Int(*i),
            Atom::Float(f) => {
                if f.fract() == 0.0 && f.abs() < 9.0e18 {
                    AtomKey::Int(*f as i64)
                } else if f.is_nan() {
                    AtomKey::Float(f64::NAN.to_bits())
                } else {
                    AtomKey::Float(f.to_bits())
                }
            }
        }
    }
}

/// Structural identity used for hashing graph nodes: distinguishes `1` from `1.0`.
impl PartialEq for Atom {
    fn eq(&self, other: &Atom) -> bool {
        match (self, other) {
            (Atom::Int(a), Atom::Int(b)) => a == b,
            (Atom::Float(a), Atom::Float(b)) => a.to_bits() == b.to_bits(),
            (Atom::Str(a), Atom::Str(b)) => a == b,
            (Atom::Bool(a), Atom::Bool(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for Atom {}
impl std::hash::Hash for Atom {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Atom::Int(i) => i.hash(h),
            Atom::Float(f) => f.to_bits().hash(h),
            Atom::Str(s) => s.hash(h),
            Atom::Bool(b) => b.hash(h),
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AtomKey {
    Int(i64),
    Float(u64),
    Str(String),
}

#[derive(Clone, Copy, Debug)]
enum Num {
    I(i64),
    F(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

/// Guards `==` between an int and a float against precision loss of `i as f64`.
fn int_float_exact(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::I(i), Num::F(f)) | (Num::F(f), Num::I(i)) => f.fract() == 0.0 && f.abs() < 9.2e18 && f as i64 == i,
        _ => true,
    }
}

/// The exact order of an int and a float (None for NaN), as Python compares them.
fn int_float_cmp(x: i64, y: f64) -> Option<Ordering> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if y.is_nan() {
        return None;
    }
    if y >= TWO_63 {
        return Some(Ordering::Less);
    }
    if y < -TWO_63 {
        return Some(Ordering::Greater);
    }
    // |y| < 2^63: its integer part is an i64, exactly.
    let t = y.trunc();
    Some(x.cmp(&(t as i64)).then(if y > t {
        Ordering::Less
    } else if y < t {
        Ordering::Greater
    } else {
        Ordering::Equal
    }))
}

/// `i / j` (j != 0) as Python computes it: the exact quotient rounded once to the nearest f64.
pub fn int_div(i: i64, j: i64) -> f64 {
    const EXACT: u64 = 1 << 53;
    if i.unsigned_abs() <= EXACT && j.unsigned_abs() <= EXACT {
        // Both exact in f64, and IEEE division rounds the exact quotient once.
        return i as f64 / j as f64;
    }
    int_div_exact(i, j)
}

/// [`int_div`] for any two i64s, in integer arithmetic.
fn int_div_exact(i: i64, j: i64) -> f64 {
    let (n, d) = (u128::from(i.unsigned_abs()), u128::from(j.unsigned_abs()));
    if n == 0 {
        return if (i < 0) != (j < 0) { -0.0 } else { 0.0 };
    }
    // n·2^s / d with at least 64 quotient bits; a nonzero remainder is a sticky bit below the
    // 53 kept (the cast rounds to nearest, ties to even), so the one rounding is exact.
    let s = n.leading_zeros() - 1;
    let (q, r) = ((n << s) / d, (n << s) % d);
    let q = if r != 0 { q | 1 } else { q };
    let x = q as f64 * 2f64.powi(-(s as i32));
    if (i < 0) != (j < 0) {
        -x
    } else {
        x
    }
}

/// Python's `repr(float)`: shortest round-trip digits; exponent form outside [1e-4, 1e16).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let sci = format!("{:e}", x.abs()); // e.g. "1.2345e3"
                                        // `{:e}` always writes `<mantissa>e<exponent>`; the fallbacks are never taken.
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp >= 0 {
            let int_len = exp + 1;
            if n <= int_len {
                format!("{}{}.0", digits, "0".repeat((int_len - n) as usize))
            } else {
                format!("{}.{}", &digits[..int_len as usize], &digits[int_len as usize..])
            }
        } else {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() == 1 { digits.clone() } else { format!("{}.{}", &digits[..1], &digits[1..]) };
        let es = if exp < 0 { "-" } else { "+" };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

/// Python `round(x)` (one argument): half to even, result an int.
pub fn py_round(a: &Atom) -> OpResult {
    match a {
        Atom::Int(i) => Ok(Atom::Int(*i)),
        Atom::Bool(b) => Ok(Atom::Int(*b as i64)),
        Atom::Float(f) => {
            if !f.is_finite() {
                return err(format!("cannot round {}", float_repr(*f)));
            }
            let r = f.round_ties_even();
            if r.abs() >= 9.2e18 {
                return err(format!("round({}) does not fit in a 64-bit integer", float_repr(*f)));
            }
            Ok(Atom::Int(r as i64))
        }
        Atom::Str(_) => err(format!("cannot round a string ({})", a.repr())),
    }
}

fn overflow(op: &str, a: &Atom, b: &Atom) -> OpError {
    OpError(format!("integer overflow in {} {op} {}", a.repr(), b.repr()))
}

fn type_err(op: &str, a: &Atom, b: &Atom) -> OpError {
    OpError(format!("unsupported operand types for {op}: {} and {} ({} {op} {})", a.type_name(), b.type_name(), a.repr(), b.repr()))
}

/// Python binary operators on atoms.
pub fn binary(op: BinOp, a: &Atom, b: &Atom) -> OpResult {
    use Atom::*;
    let sym = op.symbol();
    match op {
        BinOp::And => return Ok(if a.truthy() { b.clone() } else { a.clone() }),
        BinOp::Or => return Ok(if a.truthy() { a.clone() } else { b.clone() }),
        BinOp::Eq => return Ok(Bool(a.py_eq(b))),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let cmp = match op {
                BinOp::Lt => Cmp::Lt,
                BinOp::Le => Cmp::Le,
                BinOp::Gt => Cmp::Gt,
                _ => Cmp::Ge,
            };
            return Atom::compare(a, cmp, b).map(Bool);
        }
        _ => {}
    }
    // string cases
    match (op, a, b) {
        (BinOp::Add, Str(x), Str(y)) => {
            if x.len() + y.len() > MAX_STRING {
                return err("string too long");
            }
            return Ok(Str(format!("{x}{y}")));
        }
        (BinOp::Mul, Str(s), n) | (BinOp::Mul, n, Str(s)) if !n.is_str() && !matches!(n, Float(_)) => {
            let k = match n.num() {
                Some(Num::I(k)) => k.max(0) as usize,
                _ => 0,
            };
            if s.len().saturating_mul(k) > MAX_STRING {
                return err("string too long");
            }
            return Ok(Str(s.repeat(k)));
        }
        _ => {}
    }
    let (Some(x), Some(y)) = (a.num(), b.num()) else {
        return Err(type_err(sym, a, b));
    };
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul => match (x, y) {
            (Num::I(i), Num::I(j)) => {
                let r = match op {
                    BinOp::Add => i.checked_add(j),
                    BinOp::Sub => i.checked_sub(j),
                    _ => i.checked_mul(j),
                };
                r.map(Int).ok_or_else(|| overflow(sym, a, b))
            }
            _ => {
                let (i, j) = (x.f(), y.f());
                Ok(Float(match op {
                    BinOp::Add => i + j,
                    BinOp::Sub => i - j,
                    _ => i * j,
                }))
            }
        },
        BinOp::Div => {
            if y.f() == 0.0 {
                return err(format!("division by zero ({} / {})", a.repr(), b.repr()));
            }
            match (x, y) {
                // Python's int / int is the exact quotient, rounded once.
                (Num::I(i), Num::I(j)) => Ok(Float(int_div(i, j))),
                _ => Ok(Float(x.f() / y.f())),
            }
        }
        BinOp::Mod => {
            if y.f() == 0.0 {
                return err(format!("modulo by zero ({} % {})", a.repr(), b.repr()));
            }
            match (x, y) {
                (Num::I(i), Num::I(j)) => {
                    let r = i.checked_rem(j).ok_or_else(|| overflow(sym, a, b))?;
                    Ok(Int(if r != 0 && ((r < 0) != (j < 0)) { r + j } else { r }))
                }
                _ => {
                    let (i, j) = (x.f(), y.f());
                    let mut r = i % j;
                    if r != 0.0 && ((r < 0.0) != (j < 0.0)) {
                        r += j;
                    } else if r == 0.0 {
                        r = 0.0f64.copysign(j);
                    }
                    Ok(Float(r))
                }
            }
        }
        BinOp::Pow => match (x, y) {
            (Num::I(i), Num::I(j)) if j >= 0 => {
                let e = u32::try_from(j).map_err(|_| overflow(sym, a, b))?;
                i.checked_pow(e).map(Int).ok_or_else(|| overflow(sym, a, b))
            }
            _ => {
                let (i, j) = (x.f(), y.f());
                if i == 0.0 && j < 0.0 {
                    return err(format!("zero cannot be raised to a negative power ({} ^ {})", a.repr(), b.repr()));
                }
                if i < 0.0 && j.fract() != 0.0 {
                    return err(format!("negative number raised to a fractional power ({} ^ {})", a.repr(), b.repr()));
                }
                let r = i.powf(j);
                // Python raises OverflowError when finite operands give an infinite power
                // (an underflow to 0 is not an error).
                if r.is_infinite() && i.is_finite() && j.is_finite() {
                    return err(format!("numerical result out of range ({} ^ {})", a.repr(), b.repr()));
                }
                Ok(Float(r))
            }
        },
        // `and`, `or` and the comparisons returned above.
        BinOp::And | BinOp::Or | BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => Err(type_err(sym, a, b)),
    }
}

/// Python unary `-`.
pub fn neg(a: &Atom) -> OpResult {
    match a.num() {
        Some(Num::I(i)) => i.checked_neg().map(Atom::Int).ok_or_else(|| OpError(format!("integer overflow in -{}", a.repr()))),
        Some(Num::F(f)) => Ok(Atom::Float(-f)),
        None => err(format!("bad operand type for unary -: string ({})", a.repr())),
    }
}

/// Python unary `+`.
pub fn pos(a: &Atom) -> OpResult {
    match a.num() {
        Some(Num::I(i)) => Ok(Atom::Int(i)),
        Some(Num::F(f)) => Ok(Atom::Float(f)),
        None => err(format!("bad operand type for unary +: string ({})", a.repr())),
    }
}

/// Python `int(x)`.
pub fn to_int(a: &Atom) -> OpResult {
    match a {
        Atom::Int(i) => Ok(Atom::Int(*i)),
        Atom::Bool(b) => Ok(Atom::Int(*b as i64)),
        Atom::Float(f) => {
            if !f.is_finite() || f.abs() >= 9.2e18 {
                err(format!("cannot convert {} to an integer", float_repr(*f)))
            } else {
                Ok(Atom::Int(f.trunc() as i64))
            }
        }
        Atom::Str(s) => {
            let t = s.trim();
            let t = t.strip_prefix('+').unwrap_or(t);
            digits_grouped(t).and_then(|t| t.parse::<i64>().ok()).map(Atom::Int).ok_or_else(|| OpError(format!("invalid literal for int(): '{s}'")))
        }
    }
}

/// A number's text with Python's digit-grouping underscores removed (`1_000`); None when an
/// underscore is not between two digits (`_1`, `1__0`, `1_`), which Python rejects.
fn digits_grouped(t: &str) -> Option<String> {
    let b = t.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'_' && !(i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            return None;
        }
    }
    Some(t.replace('_', ""))
}

/// Python `float(x)`.
pub fn to_float(a: &Atom) -> OpResult {
    match a {
        Atom::Str(s) => {
            let t = s.trim().to_ascii_lowercase();
            let v = match t.as_str() {
                "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
                "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
                "nan" | "+nan" | "-nan" => Some(f64::NAN),
                _ => digits_grouped(&t).and_then(|g| g.parse::<f64>().ok()).filter(|_| t.chars().all(|c| c.is_ascii_digit() || "+-.e_".contains(c))),
            };
            v.map(Atom::Float).ok_or_else(|| OpError(format!("could not convert string to float: '{s}'")))
        }
        other => other.as_f64().map(Atom::Float).ok_or_else(|| OpError(format!("could not convert {} to float", other.repr()))),
    }
}

/// Python's `repr` of a string: single quotes unless the text has a `'` and no `"`; backslashes,
/// the quote and control characters escaped (`\n`, `\t`, `\r`, `\xNN`); other characters as
/// they are (Python 3 keeps printable non-ASCII text).
fn str_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)) => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {

    /// Python's int / int and int-vs-float comparisons are exact; values CPython 3 prints.
    #[test]
    fn big_integers_divide_and_compare_as_python() {
        assert_eq!(int_div(9007199254740993, 3), 3002399751580331.0);
        assert_eq!(int_div(27021597764222979, 3), 9007199254740992.0);
        assert_eq!(int_div(-9007199254740993, 3), -3002399751580331.0);
        assert_eq!(int_div(i64::MAX, 7), 1.3176245766935393e18);
        assert_eq!(int_div(1, i64::MIN), -1.0842021724855044e-19);
        // The integer path agrees with IEEE division wherever both operands are exact.
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (i, j) = ((x >> 11) as i64 - (1 << 52), ((x & 0xfffff) as i64) - (1 << 19));
            if j != 0 {
                assert_eq!(int_div_exact(i, j), i as f64 / j as f64, "{i} / {j}");
            }
        }
        let big = Atom::Int(9007199254740993);
        let f = Atom::Float(9007199254740992.0);
        assert_eq!(big.py_cmp(&f).unwrap(), Some(Ordering::Greater));
        assert_eq!(f.py_cmp(&big).unwrap(), Some(Ordering::Less));
        assert_eq!(Atom::Int(3).py_cmp(&Atom::Float(3.5)).unwrap(), Some(Ordering::Less));
        assert_eq!(Atom::Int(-3).py_cmp(&Atom::Float(-3.5)).unwrap(), Some(Ordering::Greater));
        assert_eq!(Atom::Int(i64::MAX).py_cmp(&Atom::Float(9.223372036854776e18)).unwrap(), Some(Ordering::Less));
        assert_eq!(Atom::Int(1).py_cmp(&Atom::Float(f64::NAN)).unwrap(), None);
    }

    /// Python's repr of strings, as CPython 3 prints them.
    #[test]
    fn string_repr_escapes_as_python_does() {
        let r = |s: &str| Atom::Str(s.to_string()).repr();
        assert_eq!(r("it's"), r#""it's""#);
        assert_eq!(r("a\\b"), r#"'a\\b'"#);
        assert_eq!(r("x\"y'z"), r#"'x"y\'z'"#);
        assert_eq!(r("\u{1}\t\n\r"), r#"'\x01\t\n\r'"#);
        assert_eq!(r("é"), "'é'");
        assert_eq!(r("\u{85}"), r#"'\x85'"#);
        assert_eq!(r("\u{7f}"), r#"'\x7f'"#);
        assert_eq!(r("plain"), "'plain'");
    }
    use super::*;

    /// Python's `int("1_000")` and `float("1_000.5")` read digit groups; an underscore not
    /// between two digits is an error there too.
    #[test]
    fn conversions_read_digit_groups_as_python_does() {
        let s = |x: &str| Atom::Str(x.into());
        assert_eq!(to_int(&s("1_000")), Ok(Atom::Int(1000)));
        assert_eq!(to_int(&s(" -12_3 ")), Ok(Atom::Int(-123)));
        assert_eq!(to_float(&s("1_000.5")), Ok(Atom::Float(1000.5)));
        for bad in ["_1", "1_", "1__0", "1_.5"] {
            assert!(to_int(&s(bad)).is_err() && to_float(&s(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn float_repr_matches_python() {
        // Expected strings are what CPython 3 prints for repr(x).
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-7, "1.5e-07"),
            (123456789.0, "123456789.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.0 / 3.0, "0.3333333333333333"),
            (2.5e20, "2.5e+20"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "repr({x})");
        }
    }

    #[test]
    fn python_modulo_and_division() {
        let i = Atom::Int;
        assert_eq!(binary(BinOp::Mod, &i(-7), &i(3)).unwrap(), i(2));
        assert_eq!(binary(BinOp::Mod, &i(7), &i(-3)).unwrap(), i(-2));
        assert_eq!(binary(BinOp::Mod, &Atom::Float(-7.5), &i(2)).unwrap(), Atom::Float(0.5));
        assert_eq!(binary(BinOp::Div, &i(7), &i(2)).unwrap(), Atom::Float(3.5));
        assert!(binary(BinOp::Div, &i(1), &i(0)).is_err());
        assert!(binary(BinOp::Add, &i(i64::MAX), &i(1)).is_err());
        assert_eq!(binary(BinOp::Pow, &i(2), &i(-1)).unwrap(), Atom::Float(0.5));
    }

    #[test]
    fn round_half_to_even() {
        let f = Atom::Float;
        for (x, want) in [(0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (2.6, 3)] {
            assert_eq!(py_round(&f(x)).unwrap(), Atom::Int(want), "round({x})");
        }
    }

    #[test]
    fn mixed_equality() {
        assert!(Atom::Int(1).py_eq(&Atom::Float(1.0)));
        assert!(Atom::Bool(true).py_eq(&Atom::Int(1)));
        assert!(!Atom::Str("1".into()).py_eq(&Atom::Int(1)));
        assert!(Atom::Str("a".into()).py_cmp(&Atom::Int(1)).is_err());
    }
}
