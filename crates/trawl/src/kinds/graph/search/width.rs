//! OctopusANN's DynamicWidth for beam search: the beam widens as the search moves from the
//! approach phase (far from the query, where extra reads rarely help) to the converge phase.
//! The width is read from a schedule indexed by the explored position — the position in the
//! candidate list of the nearest candidate not yet expanded — in steps of a fixed number of
//! positions, and capped by the beam width `W`.

use std::fmt;
use std::str::FromStr;

/// Most entries a schedule may have.
pub const MAX_STEPS: usize = 16;

/// A width per step of explored positions, e.g. `4,4,8,8,16,16,24,24,32` every 5 positions
/// (the default: OctopusANN's growth from 4 to 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WidthSchedule {
    step: u16,
    len: u8,
    widths: [u16; MAX_STEPS],
}

impl Default for WidthSchedule {
    fn default() -> Self {
        Self::new(5, &[4, 4, 8, 8, 16, 16, 24, 24, 32]).expect("valid default")
    }
}

impl WidthSchedule {
    /// A schedule of `widths` (1 to [`MAX_STEPS`] entries, each in `1..=65535`), one per `step`
    /// explored positions (`step ≥ 1`); the last width holds beyond the schedule.
    pub fn new(step: usize, widths: &[usize]) -> Result<Self, String> {
        if step == 0 || step > usize::from(u16::MAX) {
            return Err(format!("step {step} is not in 1..=65535"));
        }
        if widths.is_empty() || widths.len() > MAX_STEPS {
            return Err(format!(
                "{} widths given, a schedule holds 1 to {MAX_STEPS}",
                widths.len()
            ));
        }
        let mut out = [0u16; MAX_STEPS];
        for (o, &w) in out.iter_mut().zip(widths) {
            if w == 0 || w > usize::from(u16::MAX) {
                return Err(format!("width {w} is not in 1..=65535"));
            }
            *o = w as u16;
        }
        Ok(Self {
            step: step as u16,
            len: widths.len() as u8,
            widths: out,
        })
    }

    /// Positions per entry.
    pub fn step(&self) -> usize {
        usize::from(self.step)
    }

    /// The widths, one per step.
    pub fn widths(&self) -> impl Iterator<Item = usize> + '_ {
        self.widths[..usize::from(self.len)]
            .iter()
            .map(|&w| usize::from(w))
    }

    /// The width at `explored_position`, capped by `cap` (the beam width `W`), at least 1.
    #[inline]
    pub fn width_at(&self, explored_position: usize, cap: usize) -> usize {
        let i = (explored_position / self.step()).min(usize::from(self.len) - 1);
        usize::from(self.widths[i]).min(cap).max(1)
    }

    /// The largest width of the schedule.
    pub fn max_width(&self) -> usize {
        self.widths().max().unwrap_or(1)
    }
}

/// `W1,W2,...` (every 5 positions) or `STEP:W1,W2,...`.
impl FromStr for WidthSchedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (step, list) = match s.split_once(':') {
            Some((st, list)) => (
                st.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("bad step {st:?} in width schedule {s:?}"))?,
                list,
            ),
            None => (5, s),
        };
        let widths = list
            .split(',')
            .map(|w| {
                w.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("bad width {w:?} in width schedule {s:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(step, &widths)
    }
}

impl fmt::Display for WidthSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.step)?;
        for (i, w) in self.widths().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_grows_from_4_to_32_every_5_positions_and_is_capped() {
        let s = WidthSchedule::default();
        let at: Vec<usize> = [0, 4, 5, 9, 10, 20, 30, 39, 40, 400]
            .iter()
            .map(|&p| s.width_at(p, 32))
            .collect();
        assert_eq!(at, [4, 4, 4, 4, 8, 16, 24, 24, 32, 32]);
        assert_eq!(s.width_at(40, 12), 12, "capped by W");
        assert_eq!(s.width_at(0, 2), 2);
        assert_eq!(s.max_width(), 32);
        assert_eq!(s.to_string(), "5:4,4,8,8,16,16,24,24,32");
        assert_eq!(s.to_string().parse::<WidthSchedule>().unwrap(), s);
    }

    #[test]
    fn schedules_parse_and_bad_ones_are_refused() {
        let s: WidthSchedule = "2:1,3".parse().unwrap();
        assert_eq!(s.step(), 2);
        assert_eq!(
            (0..6).map(|p| s.width_at(p, 8)).collect::<Vec<_>>(),
            [1, 1, 3, 3, 3, 3]
        );
        assert_eq!("8,16".parse::<WidthSchedule>().unwrap().step(), 5);
        for bad in [
            "",
            "0:4",
            "4,0",
            "x",
            "5:",
            "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
        ] {
            assert!(bad.parse::<WidthSchedule>().is_err(), "{bad:?}");
        }
    }
}
