//! A label selector as SQL: one condition per requirement on the `labels` object of
//! `schedules`, through the backend's way of reading one label's value.

use std::collections::BTreeSet;

use super::{Sql, TenantRows, Val};
use crate::core::labels::{LabelSelector, SelectorOp};

/// ` AND (...)` for each requirement of `selector` (nothing for none); the values are bound.
pub(crate) fn selector_conditions<T: TenantRows>(
    sql: &mut Sql,
    selector: Option<&LabelSelector>,
) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut conditions = String::new();
    for requirement in selector.requirements() {
        let value = (T::LABEL_VALUE)(sql, &requirement.key);
        let condition = match &requirement.op {
            SelectorOp::Exists => format!("{value} IS NOT NULL"),
            SelectorOp::NotExists => format!("{value} IS NULL"),
            SelectorOp::Equals(wanted) => format!("{value} = {}", sql.val(Val::text(wanted))),
            SelectorOp::NotEquals(unwanted) => {
                let unwanted = sql.val(Val::text(unwanted));
                format!("({value} IS NULL OR {value} <> {unwanted})")
            }
            SelectorOp::In(values) => format!("{value} IN ({})", bind_all(sql, values)),
            SelectorOp::NotIn(values) => {
                let values = bind_all(sql, values);
                format!("({value} IS NULL OR {value} NOT IN ({values}))")
            }
        };
        conditions.push_str(" AND (");
        conditions.push_str(&condition);
        conditions.push(')');
    }
    conditions
}

/// `values` bound, their placeholders joined by commas.
fn bind_all(sql: &mut Sql, values: &BTreeSet<String>) -> String {
    values
        .iter()
        .map(|v| sql.val(Val::text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` AND schedule_id IN (...)`: only rows of the environment's schedules (`env`, a bound
/// placeholder) whose labels `selector` matches; nothing without a selector.
pub(crate) fn of_selected_schedules<T: TenantRows>(
    sql: &mut Sql,
    env: &str,
    selector: Option<&LabelSelector>,
) -> String {
    if selector.is_none() {
        return String::new();
    }
    let conditions = selector_conditions::<T>(sql, selector);
    format!(" AND schedule_id IN (SELECT id FROM schedules WHERE env_id = {env}{conditions})")
}
