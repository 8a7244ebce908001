//! A xorshift64 generator shared by the tests: the random inputs are the same on every run.
#![allow(dead_code)]

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }

    /// `bytes` with one to three bytes replaced, bit-flipped or incremented.
    pub fn mutate(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        for _ in 0..1 + self.next() % 3 {
            let at = self.next() as usize % b.len();
            b[at] = match self.next() % 3 {
                0 => self.next() as u8,
                1 => b[at] ^ (1 << (self.next() % 8)),
                _ => b[at].wrapping_add(1),
            };
        }
        b
    }
}
