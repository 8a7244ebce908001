//! Bounded samples: a seeded uniform reservoir and the latency figures kept with it.
//!
//! The reservoir draws from the same generator as Python's `random.Random(seed)` (MT19937 seeded by
//! `init_by_array`, `randrange` by rejection over `getrandbits`), so the figures of a capture are the same
//! whichever side computes them, and saved figures stay comparable across versions.

/// Python's `random.Random`: MT19937, seeded as `Random(seed)` seeds it, drawing as `randrange` does.
pub struct PyRandom {
    state: Box<[u32; 624]>,
    index: usize,
}

impl PyRandom {
    pub fn new(seed: u64) -> PyRandom {
        let mut rng = PyRandom { state: Box::new([0; 624]), index: 624 };
        rng.init_genrand(19_650_218);
        // Python seeds with the 32-bit words of |seed|, least significant first (at least one word)
        let key: Vec<u32> = if seed >> 32 == 0 { vec![seed as u32] } else { vec![seed as u32, (seed >> 32) as u32] };
        rng.init_by_array(&key);
        rng
    }

    fn init_genrand(&mut self, s: u32) {
        let mt = &mut self.state;
        mt[0] = s;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        self.index = 624;
    }

    fn init_by_array(&mut self, key: &[u32]) {
        let mt = &mut self.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624.max(key.len()) {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                mt[0] = mt[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                mt[0] = mt[623];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            let mt = &mut self.state;
            for k in 0..624 {
                let y = (mt[k] & 0x8000_0000) | (mt[(k + 1) % 624] & 0x7fff_ffff);
                let mut next = mt[(k + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    next ^= 0x9908_b0df;
                }
                mt[k] = next;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for 1 <= k <= 64: 32-bit words, least significant first, the last one shifted.
    fn bits(&mut self, k: u32) -> u64 {
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// `randrange(n)` for n >= 1: uniform in 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.bits(k);
            if r < n {
                return r;
            }
        }
    }
}

/// A uniform random sample of at most `cap` of the items added (Algorithm R), seeded: the same capture
/// always gives the same sample.
pub struct Reservoir<T> {
    pub cap: usize,
    pub seen: u64,
    pub items: Vec<T>,
    rng: PyRandom,
}

impl<T> Reservoir<T> {
    pub fn new(cap: usize) -> Reservoir<T> {
        Reservoir { cap, seen: 0, items: Vec::new(), rng: PyRandom::new(1) }
    }

    pub fn add(&mut self, item: T) {
        self.seen += 1;
        if self.items.len() < self.cap {
            self.items.push(item);
        } else {
            let slot = self.rng.below(self.seen);
            if slot < self.cap as u64 {
                self.items[slot as usize] = item;
            }
        }
    }
}

/// Latencies of one kind: count, total and max exactly, percentiles from a bounded sample.
pub struct Latencies {
    pub total: f64,
    pub max: Option<f64>,
    pub sample: Reservoir<f64>,
}

impl Latencies {
    pub fn new(cap: usize) -> Latencies {
        Latencies { total: 0.0, max: None, sample: Reservoir::new(cap) }
    }

    pub fn add(&mut self, value: f64) {
        self.total += value;
        if self.max.is_none_or(|max| value > max) {
            self.max = Some(value);
        }
        self.sample.add(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_as_python_random() {
        // CPython's random.Random(1): [getrandbits(32) for _ in range(3)]; randrange(10**6), randrange(3);
        // randrange(2**40), randrange(2**33 + 5)
        let mut rng = PyRandom::new(1);
        assert_eq!([rng.next_u32(), rng.next_u32(), rng.next_u32()], [577_090_037, 2_444_712_010, 3_639_700_191]);
        let mut rng = PyRandom::new(1);
        assert_eq!(rng.below(1_000_000), 140_891);
        assert_eq!(rng.below(3), 2);
        let mut rng = PyRandom::new(1);
        assert_eq!(rng.below(1 << 40), 140_719_340_484);
        assert_eq!(rng.below((1 << 33) + 5), 1_095_513_148);
    }
}
