//! Where a chunked body ends, found by following its framing byte by byte.

#[derive(Debug, Default)]
pub(super) struct Chunked {
    state: ChunkState,
    line: usize,
    size: u64,
    size_digits: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Hex digits of a chunk size.
    #[default]
    Size,
    /// A chunk extension, up to the end of the size line.
    Extension,
    /// The LF ending a size line.
    SizeLf,
    /// Chunk data still to pass.
    Data,
    /// The CR, then LF, after chunk data.
    DataCr,
    DataLf,
    /// Trailer fields after the last chunk: at the start of a line.
    TrailerLineStart,
    /// Inside a trailer line.
    TrailerLine,
    /// The LF ending a trailer line (or the final empty line when `line == 0`).
    TrailerLf,
}

/// Longest chunk-size or trailer line accepted.
const MAX_CHUNK_LINE: usize = 4096;

impl Chunked {
    /// Follow `data`; `Some(n)` when the body ends after its first `n` bytes.
    pub(super) fn feed(&mut self, data: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut i = 0;
        while i < data.len() {
            let b = data[i];
            match self.state {
                ChunkState::Data => {
                    let n = usize::try_from(self.size)
                        .unwrap_or(usize::MAX)
                        .min(data.len() - i);
                    self.size -= n as u64;
                    i += n;
                    if self.size == 0 {
                        self.state = ChunkState::DataCr;
                    }
                    continue;
                }
                ChunkState::Size => match (b as char).to_digit(16) {
                    Some(d) => {
                        self.size_digits += 1;
                        if self.size_digits > 15 {
                            return Err("a chunk size too large");
                        }
                        self.size = self.size * 16 + u64::from(d);
                    }
                    None if self.size_digits == 0 => return Err("a chunk without a size"),
                    None if b == b'\r' => self.state = ChunkState::SizeLf,
                    None if b == b';' || b == b' ' || b == b'\t' => {
                        self.state = ChunkState::Extension
                    }
                    None => return Err("a malformed chunk size"),
                },
                ChunkState::Extension => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return Err("a chunk extension too long");
                    }
                    if b == b'\r' {
                        self.state = ChunkState::SizeLf;
                    }
                }
                ChunkState::SizeLf => {
                    if b != b'\n' {
                        return Err("a chunk size line without CRLF");
                    }
                    self.line = 0;
                    self.size_digits = 0;
                    self.state = if self.size == 0 {
                        ChunkState::TrailerLineStart
                    } else {
                        ChunkState::Data
                    };
                }
                ChunkState::DataCr => {
                    if b != b'\r' {
                        return Err("chunk data longer than its size");
                    }
                    self.state = ChunkState::DataLf;
                }
                ChunkState::DataLf => {
                    if b != b'\n' {
                        return Err("chunk data without CRLF");
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::TrailerLineStart => {
                    self.line = 0;
                    self.state = if b == b'\r' {
                        ChunkState::TrailerLf
                    } else {
                        self.line = 1;
                        ChunkState::TrailerLine
                    };
                }
                ChunkState::TrailerLine => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return Err("a trailer field too long");
                    }
                    if b == b'\r' {
                        self.state = ChunkState::TrailerLf;
                    }
                }
                ChunkState::TrailerLf => {
                    if b != b'\n' {
                        return Err("a trailer line without CRLF");
                    }
                    if self.line == 0 {
                        return Ok(Some(i + 1));
                    }
                    self.state = ChunkState::TrailerLineStart;
                }
            }
            i += 1;
        }
        Ok(None)
    }
}
