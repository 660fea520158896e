//! Maps of several categorical s-ops as decision trees over their one-hots.
//!
//! A map of k categorical inputs is a table over the product of their value sets. Instead of one
//! hidden unit per combination, the table is split greedily into sub-cubes on which it is
//! constant: a *leaf* is a conjunction of literals `x_j ∈ G` (a group of values of input j) and
//! one unit `relu(2·Σ_literals Σ_{v ∈ G} onehot_j[v] - (2m - 1))` is 1 exactly when all m literals
//! hold (each literal's sum is 0 or 1 on a one-hot, and a leak under 1/2 in it changes nothing)
//! and 0 otherwise. The leaves are disjoint and cover every combination that can occur, so
//! exactly one unit is on, and it writes the table's value. A chain of conditionals `v9 if s9 else (v8 if s8 else ...)` has one leaf per branch
//! (k + 1 units instead of 2^k). Combinations no input reaches (the map fails, or an index at
//! or past the length) are "don't care" and join any neighbouring leaf.
//!
//! Never more leaves than combinations with a value: each leaf holds at least one of them.

/// A leaf: literals (input, values of that input), and the class of the table it holds.
pub(super) type Leaf = (Vec<(usize, Vec<usize>)>, u32);

/// A table: (combination, class or don't care), sorted by combination.
type Table = Vec<(usize, Option<u32>)>;

/// A group of values of one input, with the merged table of the others.
type Group = (Vec<usize>, Table);

/// Splits `class` (indexed by the mixed-radix combination `Σ idx_j·stride_j`, input 0 fastest;
/// None: don't care) into leaves on which it is constant. Leaves holding only don't-cares are
/// dropped.
pub(super) fn leaves(sizes: &[usize], class: &[Option<u32>]) -> Vec<Leaf> {
    let mut stride = Vec::with_capacity(sizes.len());
    let mut s = 1usize;
    for &n in sizes {
        stride.push(s);
        s = s.saturating_mul(n.max(1));
    }
    let rows: Table = class.iter().copied().enumerate().collect();
    let mut out = vec![];
    split(sizes, &stride, rows, (0..sizes.len()).collect(), &mut vec![], &mut out);
    // A literal keeps only the values some combination with a value in its leaf has (a group
    // may hold values merged in as don't-cares): fewer weights, the same function where defined.
    for (lits, _) in &mut out {
        let mut live: Vec<Vec<bool>> = lits.iter().map(|(j, _)| vec![false; sizes[*j]]).collect();
        let mut idx = vec![0usize; sizes.len()];
        let free: Vec<usize> = (0..sizes.len()).collect();
        // Enumerate the leaf's sub-cube: literal inputs over their groups, the others over all values.
        let choices: Vec<Vec<usize>> = free.iter().map(|&j| lits.iter().find(|(i, _)| *i == j).map_or_else(|| (0..sizes[j]).collect(), |(_, v)| v.clone())).collect();
        if choices.iter().any(Vec::is_empty) {
            continue;
        }
        loop {
            let x: usize = idx.iter().enumerate().map(|(j, &i)| choices[j][i] * stride[j]).sum();
            if class[x].is_some() {
                for (l, (j, _)) in lits.iter().enumerate() {
                    live[l][choices[*j][idx[*j]]] = true;
                }
            }
            let mut j = 0;
            while j < idx.len() {
                idx[j] += 1;
                if idx[j] < choices[j].len() {
                    break;
                }
                idx[j] = 0;
                j += 1;
            }
            if j == idx.len() {
                break;
            }
        }
        for ((_, vals), live) in lits.iter_mut().zip(&live) {
            vals.retain(|&v| live[v]);
        }
    }
    out
}

/// Distinct defined classes of a table.
fn distinct(rows: impl Iterator<Item = Option<u32>>) -> Vec<u32> {
    let mut v: Vec<u32> = rows.flatten().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// `rows`: (combination with the already fixed inputs zeroed, class), sorted by combination.
fn split(sizes: &[usize], stride: &[usize], rows: Table, free: Vec<usize>, path: &mut Vec<(usize, Vec<usize>)>, out: &mut Vec<Leaf>) {
    let classes = distinct(rows.iter().map(|r| r.1));
    match classes.as_slice() {
        [] => return,
        [c] => {
            out.push((path.clone(), *c));
            return;
        }
        _ => {}
    }
    // The input whose groups leave the fewest distinct classes in total.
    let mut best: Option<(usize, usize, Vec<Group>)> = None;
    for &j in &free {
        let groups = group(sizes[j], stride[j], &rows);
        let score: usize = groups.iter().map(|(_, t)| distinct(t.iter().map(|r| r.1)).len()).sum();
        if best.as_ref().is_none_or(|b| (score, groups.len()) < (b.0, b.2.len())) {
            best = Some((score, j, groups));
        }
    }
    let Some((_, j, groups)) = best else { return };
    let rest: Vec<usize> = free.iter().copied().filter(|&x| x != j).collect();
    let whole = groups.len() == 1;
    for (values, table) in groups {
        // A single group: the table does not depend on input j; no literal.
        if !whole {
            path.push((j, values));
        }
        split(sizes, stride, table, rest.clone(), path, out);
        if !whole {
            path.pop();
        }
    }
}

/// Groups the values of one input whose sub-tables agree wherever both are defined; each group
/// with its merged table (keys with that input zeroed).
fn group(n: usize, stride: usize, rows: &[(usize, Option<u32>)]) -> Vec<Group> {
    let mut subs: Vec<Table> = vec![vec![]; n];
    for &(key, c) in rows {
        let v = (key / stride) % n;
        subs[v].push((key - v * stride, c));
    }
    let mut groups: Vec<Group> = vec![];
    for (v, sub) in subs.into_iter().enumerate() {
        if sub.is_empty() {
            continue;
        }
        let fits = |t: &[(usize, Option<u32>)]| t.len() == sub.len() && t.iter().zip(&sub).all(|(a, b)| a.0 == b.0 && (a.1.is_none() || b.1.is_none() || a.1 == b.1));
        match groups.iter_mut().find(|(_, t)| fits(t)) {
            Some((vals, t)) => {
                vals.push(v);
                for (a, b) in t.iter_mut().zip(&sub) {
                    a.1 = a.1.or(b.1);
                }
            }
            None => groups.push((vec![v], sub)),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a combination.
    fn digits(mut x: usize, sizes: &[usize]) -> Vec<usize> {
        sizes
            .iter()
            .map(|&n| {
                let d = x % n;
                x /= n;
                d
            })
            .collect()
    }

    /// Every defined combination lies in exactly one leaf, of its class.
    fn check(sizes: &[usize], class: &[Option<u32>]) -> Vec<Leaf> {
        let ls = leaves(sizes, class);
        for (x, c) in class.iter().enumerate() {
            let d = digits(x, sizes);
            let hits: Vec<&Leaf> = ls.iter().filter(|(lits, _)| lits.iter().all(|(j, vals)| vals.contains(&d[*j]))).collect();
            if let Some(c) = c {
                assert_eq!(hits.len(), 1, "combination {d:?}");
                assert_eq!(hits[0].1, *c, "combination {d:?}");
            } else {
                assert!(hits.len() <= 1, "combination {d:?}");
            }
        }
        assert!(ls.len() <= class.iter().flatten().count());
        ls
    }

    #[test]
    fn a_chain_of_conditionals_is_one_leaf_per_branch() {
        // running max: the largest v with s_v set, else 0; inputs s_1..s_9 (booleans).
        let sizes = vec![2; 9];
        let class: Vec<Option<u32>> = (0..512usize).map(|x| Some((0..9).rev().find(|&v| x >> v & 1 == 1).map_or(0, |v| v as u32 + 1))).collect();
        assert_eq!(check(&sizes, &class).len(), 10);
    }

    #[test]
    fn equal_branches_share_a_group() {
        // x if c else y, x and y of 5 values: 5 + 5 leaves, not 50.
        let sizes = vec![5, 2, 5];
        let class: Vec<Option<u32>> = (0..50usize)
            .map(|x| {
                let d = digits(x, &sizes);
                Some(if d[1] == 1 { d[0] } else { d[2] } as u32)
            })
            .collect();
        assert_eq!(check(&sizes, &class).len(), 10);
    }

    #[test]
    fn random_tables_are_partitioned_exactly() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let k = 1 + next() as usize % 4;
            let sizes: Vec<usize> = (0..k).map(|_| 1 + next() as usize % 4).collect();
            let total: usize = sizes.iter().product();
            let classes = 1 + next() % 4;
            let class: Vec<Option<u32>> = (0..total).map(|_| if next() % 5 == 0 { None } else { Some((next() % classes) as u32) }).collect();
            check(&sizes, &class);
        }
    }
}
