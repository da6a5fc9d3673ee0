//! Pass/fail checks on the aggregate report, as Artillery's `ensure`:
//! v2 `thresholds` (`metric < value`) and `conditions` (expressions such as
//! `http.response_time.p99 < 200 and http.request_rate > 10`, `strict: false` only reports),
//! and the legacy keys `maxErrorRate` (percent of virtual users that did not complete, `<=`;
//! a run without virtual users fails it, as Artillery's 0/0), `min`, `max`, `median`,
//! `p95`, `p99` (on `http.response_time`, `<` the limit's whole part). Read from
//! `config.ensure`, or `config.plugins.ensure` without it.
//!
//! A metric name resolves to a counter, a rate, or a summary field (`name.p99`). An absent
//! counter is 0 (no `errors.ETIMEDOUT` means none); an absent summary has no value, and a
//! check on it fails.

use crate::{report::Period, script::model::Ensure};

#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub description: String,
    /// Each metric the check reads, with its value (absent: not measured in the run).
    pub measured: Vec<(String, Option<f64>)>,
    pub ok: bool,
    /// Whether a failure changes the exit code.
    pub strict: bool,
}

/// Evaluates every check; expressions were validated when the script was loaded.
pub fn evaluate(ensure: &Ensure, agg: &Period) -> Vec<Check> {
    let mut checks = Vec::new();
    for map in &ensure.thresholds {
        for (metric, limit) in map {
            let v = value(metric, agg);
            let ok = v.is_some_and(|v| v < *limit);
            checks.push(Check {
                description: format!("{metric} < {limit}"),
                measured: vec![(metric.clone(), v)],
                ok,
                strict: true,
            });
        }
    }
    for c in &ensure.conditions {
        let (ok, measured) = match parse(&c.expression) {
            Ok(e) => {
                let mut names = Vec::new();
                e.metrics(&mut names);
                let measured = names
                    .into_iter()
                    .map(|n| {
                        let v = value(&n, agg);
                        (n, v)
                    })
                    .collect();
                (e.eval(agg) != 0.0, measured)
            }
            Err(_) => (false, Vec::new()),
        };
        checks.push(Check {
            description: c.expression.clone(),
            measured,
            ok,
            strict: c.strict.unwrap_or(true),
        });
    }
    let legacy = [
        ("min", ensure.min),
        ("max", ensure.max),
        ("median", ensure.median),
        ("p95", ensure.p95),
        ("p99", ensure.p99),
    ];
    for (field, limit) in legacy {
        if let Some(limit) = limit {
            // Artillery: `parseInt(limit)`, then `<`.
            let limit = limit.trunc();
            let metric = format!("http.response_time.{field}");
            let v = value(&metric, agg);
            let ok = v.is_some_and(|v| v < limit);
            checks.push(Check {
                description: format!("{field} < {limit}"),
                measured: vec![(metric, v)],
                ok,
                strict: true,
            });
        }
    }
    if let Some(max) = ensure.max_error_rate {
        let created = agg.counter("vusers.created") as f64;
        let completed = agg.counter("vusers.completed") as f64;
        let rate = (created - completed) / created * 100.0;
        checks.push(Check {
            description: format!("maxErrorRate < {max}"),
            measured: vec![(
                "(vusers.created - vusers.completed) / vusers.created (%)".to_string(),
                rate.is_finite().then_some(rate),
            )],
            ok: rate <= max,
            strict: true,
        });
    }
    // As Artillery prints them: passed checks first.
    checks.sort_by_key(|c| !c.ok);
    checks
}

/// Whether every strict check passed.
pub fn passed(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.ok || !c.strict)
}

/// The value of a metric name in a period.
pub fn value(name: &str, p: &Period) -> Option<f64> {
    if let Some(v) = p.counters.get(name) {
        return Some(*v as f64);
    }
    if let Some(v) = p.rates.get(name) {
        return Some(*v);
    }
    if let Some((base, field)) = name.rsplit_once('.') {
        if let Some(s) = p.summaries.get(base) {
            return s.field(field);
        }
        if crate::report::SummaryStats::default()
            .field(field)
            .is_some()
        {
            return None;
        }
    }
    Some(0.0)
}

/// A parsed condition expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Num(f64),
    /// A quoted string (`ifTrue: "status == 'ok'"`); NaN among metrics.
    Str(String),
    Metric(String),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Bin(Box<Expr>, Op, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Or,
    And,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl Expr {
    /// The metric names the expression reads, each once, in order of appearance.
    pub fn metrics(&self, out: &mut Vec<String>) {
        match self {
            Expr::Num(_) | Expr::Str(_) => {}
            Expr::Metric(m) => {
                if !out.contains(m) {
                    out.push(m.clone());
                }
            }
            Expr::Not(e) | Expr::Neg(e) => e.metrics(out),
            Expr::Bin(a, _, b) => {
                a.metrics(out);
                b.metrics(out);
            }
        }
    }

    pub fn eval(&self, p: &Period) -> f64 {
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        match self {
            Expr::Num(n) => *n,
            Expr::Str(_) => f64::NAN,
            Expr::Metric(m) => value(m, p).unwrap_or(f64::NAN),
            Expr::Not(e) => b(e.eval(p) == 0.0),
            Expr::Neg(e) => -e.eval(p),
            Expr::Bin(l, op, r) => {
                let (x, y) = (l.eval(p), r.eval(p));
                match op {
                    Op::Or => b(x != 0.0 && !x.is_nan() || y != 0.0 && !y.is_nan()),
                    Op::And => b(x != 0.0 && !x.is_nan() && y != 0.0 && !y.is_nan()),
                    Op::Lt => b(x < y),
                    Op::Le => b(x <= y),
                    Op::Gt => b(x > y),
                    Op::Ge => b(x >= y),
                    Op::Eq => b(x == y),
                    Op::Ne => b(x != y),
                    Op::Add => x + y,
                    Op::Sub => x - y,
                    Op::Mul => x * y,
                    Op::Div => x / y,
                    Op::Rem => x % y,
                }
            }
        }
    }
}

/// A value of an expression over a virtual user's variables (`ifTrue`), as filtrex has
/// them in Artillery: numbers and strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Num(f64),
    Str(String),
}

impl Val {
    fn num(&self) -> f64 {
        match self {
            Val::Num(n) => *n,
            Val::Str(s) => s.trim().parse().unwrap_or(f64::NAN),
        }
    }

    pub fn truthy(&self) -> bool {
        match self {
            Val::Num(n) => *n != 0.0 && !n.is_nan(),
            Val::Str(s) => !s.is_empty(),
        }
    }
}

impl Expr {
    /// Evaluates over variables: a name is looked up by `var`; `==` and `!=` compare
    /// strings as strings, everything else is arithmetic.
    pub fn eval_with(&self, var: &dyn Fn(&str) -> Val) -> Val {
        let b = |x: bool| Val::Num(if x { 1.0 } else { 0.0 });
        match self {
            Expr::Num(n) => Val::Num(*n),
            Expr::Str(s) => Val::Str(s.clone()),
            Expr::Metric(m) => var(m),
            Expr::Not(e) => b(!e.eval_with(var).truthy()),
            Expr::Neg(e) => Val::Num(-e.eval_with(var).num()),
            Expr::Bin(l, op, r) => {
                let (x, y) = (l.eval_with(var), r.eval_with(var));
                let same = |x: &Val, y: &Val| match (x, y) {
                    (Val::Str(a), Val::Str(b)) => a == b,
                    _ => x.num() == y.num(),
                };
                let (a, c) = (x.num(), y.num());
                match op {
                    Op::Or => b(x.truthy() || y.truthy()),
                    Op::And => b(x.truthy() && y.truthy()),
                    Op::Eq => b(same(&x, &y)),
                    Op::Ne => b(!same(&x, &y)),
                    Op::Lt => b(a < c),
                    Op::Le => b(a <= c),
                    Op::Gt => b(a > c),
                    Op::Ge => b(a >= c),
                    Op::Add => Val::Num(a + c),
                    Op::Sub => Val::Num(a - c),
                    Op::Mul => Val::Num(a * c),
                    Op::Div => Val::Num(a / c),
                    Op::Rem => Val::Num(a % c),
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Sym(&'static str),
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let end = chars[i + 1..]
                .iter()
                .position(|d| *d == c)
                .ok_or("unterminated string")?;
            out.push(Tok::Str(chars[i + 1..i + 1 + end].iter().collect()));
            i += end + 2;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            out.push(Tok::Num(
                s.parse().map_err(|_| format!("bad number {s:?}"))?,
            ));
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len() {
                let d = chars[i];
                let dash_in_name = d == '-'
                    && chars[i - 1].is_alphabetic()
                    && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
                if d.is_alphanumeric() || d == '_' || d == '.' || d == '$' || dash_in_name {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let sym = ["<=", ">=", "==", "!=", "&&", "||"]
                .into_iter()
                .find(|s| *s == two);
            if let Some(s) = sym {
                out.push(Tok::Sym(s));
                i += 2;
                continue;
            }
            let one = ["<", ">", "+", "-", "*", "/", "%", "(", ")", "!"]
                .into_iter()
                .find(|s| s.starts_with(c));
            match one {
                Some(s) => out.push(Tok::Sym(s)),
                None => return Err(format!("unexpected character {c:?}")),
            }
            i += 1;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek_op(&self, table: &[(&str, Op)]) -> Option<Op> {
        let name = match self.toks.get(self.pos)? {
            Tok::Sym(s) => *s,
            Tok::Ident(s) => s.as_str(),
            Tok::Num(_) | Tok::Str(_) => return None,
        };
        table.iter().find(|(n, _)| *n == name).map(|(_, op)| *op)
    }

    fn binary(
        &mut self,
        table: &[(&str, Op)],
        next: fn(&mut Self) -> Result<Expr, String>,
    ) -> Result<Expr, String> {
        let mut left = next(self)?;
        while let Some(op) = self.peek_op(table) {
            self.pos += 1;
            let right = next(self)?;
            left = Expr::Bin(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.binary(&[("or", Op::Or), ("||", Op::Or)], Self::and)
    }
    fn and(&mut self) -> Result<Expr, String> {
        self.binary(&[("and", Op::And), ("&&", Op::And)], Self::not)
    }
    fn not(&mut self) -> Result<Expr, String> {
        match self.toks.get(self.pos) {
            Some(Tok::Ident(s)) if s == "not" => {}
            Some(Tok::Sym("!")) => {}
            _ => return self.cmp(),
        }
        self.pos += 1;
        Ok(Expr::Not(Box::new(self.not()?)))
    }
    fn cmp(&mut self) -> Result<Expr, String> {
        let table = [
            ("<", Op::Lt),
            ("<=", Op::Le),
            (">", Op::Gt),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
        ];
        self.binary(&table, Self::sum)
    }
    fn sum(&mut self) -> Result<Expr, String> {
        self.binary(&[("+", Op::Add), ("-", Op::Sub)], Self::product)
    }
    fn product(&mut self) -> Result<Expr, String> {
        self.binary(
            &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Rem)],
            Self::unary,
        )
    }
    fn unary(&mut self) -> Result<Expr, String> {
        let tok = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or("unexpected end of expression")?;
        self.pos += 1;
        match tok {
            Tok::Num(n) => Ok(Expr::Num(n)),
            Tok::Str(s) => Ok(Expr::Str(s)),
            Tok::Ident(name) if !matches!(name.as_str(), "and" | "or" | "not") => {
                Ok(Expr::Metric(name))
            }
            Tok::Sym("-") => Ok(Expr::Neg(Box::new(self.unary()?))),
            Tok::Sym("(") => {
                let e = self.or()?;
                match self.toks.get(self.pos) {
                    Some(Tok::Sym(")")) => {
                        self.pos += 1;
                        Ok(e)
                    }
                    _ => Err("missing )".into()),
                }
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

/// Parses a condition such as `http.response_time.p99 < 200 and vusers.failed == 0`.
pub fn parse(text: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
    };
    let e = p.or()?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected {:?}", p.toks[p.pos]));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SummaryStats;

    #[test]
    fn conditions() {
        let mut p = Period::default();
        p.counters.insert("vusers.failed".into(), 2);
        p.rates.insert("http.request_rate".into(), 20.0);
        p.summaries.insert(
            "http.response_time".into(),
            SummaryStats {
                p99: 150.0,
                ..Default::default()
            },
        );
        let t = |s: &str| parse(s).unwrap().eval(&p) != 0.0;
        assert!(t("http.response_time.p99 < 200 and http.request_rate > 10"));
        assert!(!t("http.response_time.p99 < 100 or vusers.failed == 0"));
        assert!(t("not (vusers.failed > 5) && errors.ETIMEDOUT == 0"));
        assert!(t("vusers.failed * 2 + 1 == 5"));
        assert!(!t("http.other_time.p99 < 1000"), "no data fails");
        assert!(parse("a < ").is_err());
    }

    #[test]
    fn expressions_over_variables() {
        let var = |name: &str| match name {
            "id" => Val::Num(3.0),
            "status" => Val::Str("ok".into()),
            "count" => Val::Str("12".into()),
            _ => Val::Num(f64::NAN),
        };
        let t = |s: &str| parse(s).unwrap().eval_with(&var).truthy();
        assert!(t("id < 5 and status == 'ok'"));
        assert!(t("status != \"no\" and count > 10"));
        assert!(!t("missing > 0 or id == 4"));
        assert!(t("not missing"));
        assert!(t("id"));
    }
}
