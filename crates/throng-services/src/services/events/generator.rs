//! Events shaped like the write-up's `MonthlyFeeChargedEvent`: 14 root
//! properties, one of them an array of objects (the loan's repayment
//! schedule), about 9.4 KB as JSON, with the repetition of real data (the
//! same keys in every installment, amounts that repeat month to month,
//! dates one month apart, a handful of status values).
//!
//! [`FeeCharged`] is the contract type (every field); [`FeeChargedRead`]
//! the read model's type: the 5 root fields it uses, found by name, the
//! schedule skipped.

use serde::{Deserialize, Serialize};

/// The event type name.
pub const EVENT_TYPE: &str = "MonthlyFeeCharged";
/// The stream category of generated events (`loan-{id}`).
pub const CATEGORY: &str = "loan";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeeCharged {
    pub loan_id: String,
    pub customer_id: String,
    pub account_number: String,
    pub fee_type: String,
    pub amount: f64,
    pub currency: String,
    pub charged_on: String,
    pub period_start: String,
    pub period_end: String,
    pub balance_after: f64,
    pub product_code: String,
    pub branch: String,
    pub correlation_id: String,
    pub repayment_schedule: Vec<Installment>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Installment {
    pub installment_number: u32,
    pub due_date: String,
    pub opening_balance: f64,
    pub principal: f64,
    pub interest: f64,
    pub fees: f64,
    pub total_due: f64,
    pub closing_balance: f64,
    pub status: String,
}

/// The root fields [`FeeChargedRead`] reads, by name.
pub const READ_FIELDS: [&str; 5] = ["loanId", "feeType", "amount", "chargedOn", "balanceAfter"];

/// What the rebuilt read model needs: 5 root fields, by name.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeeChargedRead {
    pub loan_id: String,
    pub fee_type: String,
    pub amount: f64,
    pub charged_on: String,
    pub balance_after: f64,
}

/// Installments in a schedule: the loan's remaining months (60-month
/// loans, 44 to 54 left), which puts the JSON at ~9.4 KB on average.
const TERM_MONTHS: u64 = 60;
const SCHEDULE_LEN_MIN: u64 = 44;
const SCHEDULE_LEN_MAX: u64 = 54;

const FEE_TYPES: &[&str] = &[
    "MonthlyAccountKeepingFee",
    "MonthlyServiceFee",
    "LatePaymentFee",
];
const BRANCHES: &[&str] = &[
    "SYD-CBD",
    "MEL-SOUTHBANK",
    "BNE-NORTH",
    "PER-WEST",
    "ADL-EAST",
];
const PRODUCTS: &[&str] = &["PL-36M-FIXED", "PL-36M-VARIABLE", "CAR-36M-SECURED"];

fn mix(n: u64, salt: u64) -> u64 {
    crate::platform::mix::mix64(n, salt)
}

fn uuid_of(n: u64, salt: u64) -> String {
    uuid::Uuid::from_u64_pair(mix(n, salt), mix(n, salt ^ 0x5555)).to_string()
}

/// A date `months` months after 2024-01-`day`, as YYYY-MM-DD.
fn month_date(months: u64, day: u64) -> String {
    let y = 2024 + months / 12;
    let m = 1 + months % 12;
    format!("{y:04}-{m:02}-{day:02}")
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Event `n` (deterministic): loan `loan`, its month `month`.
pub fn fee_charged(loan: u64, month: u64) -> FeeCharged {
    let n = loan.wrapping_mul(64).wrapping_add(month);
    let day = 1 + mix(loan, 1) % 28;
    let principal_total = 5_000.0 + (mix(loan, 2) % 45_000) as f64;
    let rate = 0.05 + (mix(loan, 3) % 900) as f64 / 10_000.0;
    let left = SCHEDULE_LEN_MIN + mix(loan, 4) % (SCHEDULE_LEN_MAX - SCHEDULE_LEN_MIN + 1);
    let monthly_fee = [10.0, 12.5, 15.0][(mix(loan, 5) % 3) as usize];
    let payment = cents(principal_total / TERM_MONTHS as f64 * (1.0 + rate));
    let mut balance = cents(principal_total * (left as f64) / TERM_MONTHS as f64);
    let schedule: Vec<Installment> = (0..left)
        .map(|i| {
            let interest = cents(balance * rate / 12.0);
            let principal = cents((payment - interest).min(balance));
            let closing = cents(balance - principal);
            let inst = Installment {
                installment_number: (TERM_MONTHS - left + i + 1) as u32,
                due_date: month_date(month + i + 1, day),
                opening_balance: balance,
                principal,
                interest,
                fees: monthly_fee,
                total_due: cents(principal + interest + monthly_fee),
                closing_balance: closing,
                status: if i == 0 { "Due" } else { "Scheduled" }.to_string(),
            };
            balance = closing;
            inst
        })
        .collect();
    let balance_after = cents(principal_total * (left as f64) / TERM_MONTHS as f64 + monthly_fee);
    FeeCharged {
        loan_id: uuid_of(loan, 10),
        customer_id: uuid_of(loan, 11),
        account_number: format!("ACC-{:010}", mix(loan, 12) % 10_000_000_000),
        // One loan's regular fee; now and then a late fee.
        fee_type: FEE_TYPES[if mix(n, 13).is_multiple_of(10) {
            2
        } else {
            (mix(loan, 13) % 2) as usize
        }]
        .to_string(),
        amount: monthly_fee,
        currency: "AUD".to_string(),
        charged_on: format!("{}T00:00:00.000Z", month_date(month, day)),
        period_start: month_date(month.saturating_sub(1), day),
        period_end: month_date(month, day),
        balance_after,
        product_code: PRODUCTS[(mix(loan, 14) % PRODUCTS.len() as u64) as usize].to_string(),
        branch: BRANCHES[(mix(loan, 15) % BRANCHES.len() as u64) as usize].to_string(),
        correlation_id: uuid_of(n, 16),
        repayment_schedule: schedule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shaped_like_the_write_up() {
        let e = fee_charged(7, 3);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 14, "14 root properties");
        assert!(v["repaymentSchedule"].as_array().unwrap()[0].is_object());
        let mean = (0..200)
            .map(|l| serde_json::to_vec(&fee_charged(l, l % 12)).unwrap().len())
            .sum::<usize>()
            / 200;
        println!("mean JSON bytes {mean}");
        assert!((9_000..=9_900).contains(&mean), "mean JSON bytes {mean}");
        let read: FeeChargedRead = serde_json::from_value(v).unwrap();
        assert_eq!(read.amount, e.amount);
        assert_eq!(read.loan_id, e.loan_id);
    }
}
