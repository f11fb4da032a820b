//! Pareto frontier on two "smaller is better" objectives (energy, latency).

/// `a` dominates `b`: no worse on both, strictly better on one.
pub fn dominates(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.0 && a.1 <= b.1 && (a.0 < b.0 || a.1 < b.1)
}

/// Indices of the non-dominated points, ordered by the first objective then the second. Equal
/// points do not dominate each other, so duplicates on the front are all kept. O(n log n): sort by
/// (x, y) and keep a point when its y beats every y seen at a smaller x.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    order.sort_by(|&a, &b| {
        points[a]
            .0
            .total_cmp(&points[b].0)
            .then(points[a].1.total_cmp(&points[b].1))
    });
    let mut front: Vec<usize> = Vec::new();
    let mut best_y = f64::INFINITY;
    for i in order {
        let p = points[i];
        let duplicate_of_last = front.last().is_some_and(|&l| points[l] == p);
        if p.1 < best_y || duplicate_of_last {
            best_y = best_y.min(p.1);
            front.push(i);
        }
    }
    front
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute_force(points: &[(f64, f64)]) -> Vec<usize> {
        (0..points.len())
            .filter(|&i| !points.iter().any(|&q| dominates(q, points[i])))
            .collect()
    }

    #[test]
    fn small_worked_example() {
        let pts = [
            (1.0, 5.0),
            (2.0, 3.0),
            (3.0, 4.0),
            (4.0, 1.0),
            (2.0, 3.0),
            (1.0, 6.0),
        ];
        let mut f = pareto_front(&pts);
        f.sort();
        assert_eq!(f, vec![0, 1, 3, 4]);
    }

    proptest! {
        // Small integer coordinates force ties and duplicates.
        #[test]
        fn front_matches_brute_force(raw in prop::collection::vec((0u8..12, 0u8..12), 0..60)) {
            let pts: Vec<(f64, f64)> = raw.iter().map(|&(a, b)| (a as f64, b as f64)).collect();
            let mut fast = pareto_front(&pts);
            fast.sort();
            prop_assert_eq!(fast, brute_force(&pts));
        }

        #[test]
        fn front_matches_brute_force_on_reals(raw in prop::collection::vec((0.0f64..1e4, 0.0f64..500.0), 0..80)) {
            let mut fast = pareto_front(&raw);
            fast.sort();
            prop_assert_eq!(fast, brute_force(&raw));
        }
    }
}
