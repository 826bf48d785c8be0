//! A session's logs in one append-only file, `output.log` in its log folder, instead of a
//! file per log: creating a file for each worker and each check (an inode each) was most of
//! the runner's own cost per worker. A log is still named by its path,
//! `<folder>/<name>` ([`crate::run::log_name::LogName`]); readers find it in the folder's own
//! file of that name when there is one (an earlier session's logs, a bundle's), else among
//! `output.log`'s records.
//!
//! The file: [`MAGIC`], then records, each `0xFE`, the name's length (u16, little-endian),
//! the name, the data's length (u32, little-endian), the data. A log's bytes are its records'
//! data in order. Every log starts with an empty record, so it is listed from its start,
//! before its worker prints. One process writes a folder's file
//! (the run holding the session's lock), each record with one `write`; a record cut short by
//! a crash ends the file for readers, and the next writer cuts it off before appending.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// The file's name in the log folder.
pub const FILE: &str = "output.log";
const MAGIC: &[u8] = b"prdloop output log 1\n";
const TAG: u8 = 0xFE;
/// A record's data at most (a worker's output is cut into records of this much or less).
const RECORD_MAX: usize = 1 << 20;

/// Where one record's data lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    at: u64,
    len: u32,
}

/// The records of a file, by name, in the order they were written.
#[derive(Debug, Default)]
struct Index {
    spans: HashMap<String, Vec<Span>>,
    /// The names by their last record's position.
    last: HashMap<String, u64>,
    /// Where the complete records end.
    end: u64,
}

impl Index {
    fn add(&mut self, name: &str, span: Span) {
        self.spans.entry(name.to_string()).or_default().push(span);
        self.last.insert(name.to_string(), span.at);
    }

    /// Reads the records of `f` from `from` (a record's start; `index.end`), adding them.
    fn scan(&mut self, f: &File, from: u64) -> io::Result<()> {
        let mut r = BufReader::new(f);
        r.seek(SeekFrom::Start(from))?;
        let mut at = from;
        if at == 0 {
            let mut magic = [0u8; MAGIC.len()];
            if r.read_exact(&mut magic).is_err() || magic != MAGIC {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "not a prdloop output log (no `{}` line)",
                        MAGIC.escape_ascii()
                    ),
                ));
            }
            at = MAGIC.len() as u64;
        }
        self.end = at;
        let size = f.metadata()?.len();
        loop {
            let mut head = [0u8; 3];
            if r.read_exact(&mut head).is_err() || head[0] != TAG {
                break;
            }
            let mut name = vec![0u8; u16::from_le_bytes([head[1], head[2]]) as usize];
            let mut len = [0u8; 4];
            if r.read_exact(&mut name).is_err() || r.read_exact(&mut len).is_err() {
                break;
            }
            let Ok(name) = String::from_utf8(name) else {
                break;
            };
            if !plain_name(&name) {
                break;
            }
            let len = u32::from_le_bytes(len);
            let data = at + 3 + name.len() as u64 + 4;
            let next = data + u64::from(len);
            if next > size {
                break;
            }
            r.seek_relative(i64::from(len))?;
            self.add(&name, Span { at: data, len });
            at = next;
            self.end = at;
        }
        Ok(())
    }

    fn of(f: &File) -> io::Result<Index> {
        let mut index = Index::default();
        index.scan(f, 0)?;
        Ok(index)
    }
}

/// A folder's `output.log`, open for appending, with its index. One per folder in this
/// process ([`Book::of`]); whoever holds it keeps it open.
#[derive(Debug)]
pub struct Book {
    inner: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    file: File,
    index: Index,
}

static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<Book>>>> = LazyLock::new(Default::default);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Book {
    /// The book of `dir` (made, with the folder, when there is none yet): the one this
    /// process has open, else opened now.
    pub fn of(dir: &Path) -> io::Result<Arc<Book>> {
        let mut open = lock(&OPEN);
        if let Some(b) = open.get(dir).and_then(Weak::upgrade) {
            return Ok(b);
        }
        open.retain(|_, b| b.strong_count() > 0);
        let book = Arc::new(Book::open(dir)?);
        open.insert(dir.to_path_buf(), Arc::downgrade(&book));
        Ok(book)
    }

    /// The book of `dir` if this process has it open.
    fn opened(dir: &Path) -> Option<Arc<Book>> {
        lock(&OPEN).get(dir).and_then(Weak::upgrade)
    }

    fn open(dir: &Path) -> io::Result<Book> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)?
        };
        if !file.metadata()?.is_file() {
            return Err(io::Error::other(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        let index = if file.metadata()?.len() == 0 {
            file.write_all_at(MAGIC, 0)?;
            Index {
                end: MAGIC.len() as u64,
                ..Index::default()
            }
        } else {
            let index = Index::of(&file)?;
            // What a crash left of a last record goes.
            file.set_len(index.end)?;
            index
        };
        Ok(Book {
            inner: Mutex::new(Open { file, index }),
        })
    }

    /// Appends `data` to the log `name` (as records of at most [`RECORD_MAX`] bytes; an empty
    /// one when `data` is empty).
    pub fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        if !plain_name(name) {
            return Err(io::Error::other(format!("`{name}` is not a log's name")));
        }
        let name_len = u16::try_from(name.len())
            .map_err(|_| io::Error::other(format!("a log name of {} bytes", name.len())))?;
        let mut o = lock(&self.inner);
        let mut pieces: Vec<&[u8]> = data.chunks(RECORD_MAX).collect();
        if pieces.is_empty() {
            pieces.push(&[]);
        }
        for piece in pieces {
            let mut rec = Vec::with_capacity(7 + name.len() + piece.len());
            rec.push(TAG);
            rec.extend_from_slice(&name_len.to_le_bytes());
            rec.extend_from_slice(name.as_bytes());
            rec.extend_from_slice(&(piece.len() as u32).to_le_bytes());
            rec.extend_from_slice(piece);
            let at = o.index.end;
            o.file.write_all_at(&rec, at)?;
            let span = Span {
                at: at + 7 + name.len() as u64,
                len: piece.len() as u32,
            };
            o.index.add(name, span);
            o.index.end = at + rec.len() as u64;
        }
        Ok(())
    }
}

/// One log's writer: what the worker printed, kept until there is a record's worth
/// ([`PENDING_MAX`]) or it ends ([`LogOut::finish`]).
#[derive(Debug)]
pub struct LogOut {
    book: Arc<Book>,
    name: String,
    pending: Vec<u8>,
}

/// How much of a log is kept before it is written (a running worker's log is behind by at
/// most this much).
const PENDING_MAX: usize = 8 * 1024;

impl LogOut {
    /// The writer of the log at `path` (`<folder>/<name>`), which exists from now on (an
    /// empty record), so that a running worker's log is listed before it prints.
    pub fn create(path: &Path) -> io::Result<LogOut> {
        let (dir, name) = split(path)
            .ok_or_else(|| io::Error::other(format!("{} names no log", path.display())))?;
        let book = Book::of(dir)?;
        book.append(name, &[])?;
        Ok(LogOut {
            book,
            name: name.to_string(),
            pending: Vec::new(),
        })
    }

    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= PENDING_MAX {
            self.finish()?;
        }
        Ok(())
    }

    /// Writes what is pending.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        self.book.append(&self.name, &pending)
    }
}

/// Whether `name` is a name a log can have: one plain part of a path, never a folder's, a
/// parent's or an absolute one (so a record can only ever name a log in its own folder).
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name != FILE
        && !name.contains(['/', '\\', '\0'])
}

/// The folder and the name of the log at `path`.
fn split(path: &Path) -> Option<(&Path, &str)> {
    Some((path.parent()?, path.file_name()?.to_str()?))
}

/// Where the log at `path` is: its own file, or records of its folder's `output.log`.
enum Found {
    File(File),
    Records { file: File, spans: Vec<Span> },
}

fn find(path: &Path) -> io::Result<Found> {
    match crate::fsutil::open_no_follow(path) {
        Ok(f) if f.metadata()?.is_file() => return Ok(Found::File(f)),
        Ok(_) => return Err(io::Error::other("not a regular file")),
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        Err(_) => {}
    }
    let Some((dir, name)) = split(path) else {
        return Err(io::ErrorKind::NotFound.into());
    };
    let spans = match Book::opened(dir) {
        Some(b) => {
            let o = lock(&b.inner);
            let spans = o.index.spans.get(name).cloned();
            spans.map(|s| (o.file.try_clone(), s))
        }
        None => {
            let file = open_log(dir)?;
            let spans = Index::of(&file)?.spans.remove(name);
            spans.map(|s| (Ok(file), s))
        }
    };
    match spans {
        Some((file, spans)) => Ok(Found::Records { file: file?, spans }),
        None => Err(io::ErrorKind::NotFound.into()),
    }
}

fn open_log(dir: &Path) -> io::Result<File> {
    let f = crate::fsutil::open_no_follow(&dir.join(FILE))?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other(format!("{FILE} is not a regular file")));
    }
    Ok(f)
}

/// The bytes of `spans` from byte `from` of the log on, at most `max`.
fn read_spans(file: &File, spans: &[Span], from: u64, max: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut skip = from;
    for s in spans {
        let len = u64::from(s.len);
        if skip >= len {
            skip -= len;
            continue;
        }
        let want = (len - skip).min(max - out.len() as u64) as usize;
        let start = out.len();
        out.resize(start + want, 0);
        file.read_exact_at(&mut out[start..], s.at + skip)?;
        skip = 0;
        if out.len() as u64 >= max {
            break;
        }
    }
    Ok(out)
}

/// The end of a log: its last `max` bytes, and whether it was cut.
#[derive(Debug, Default)]
pub struct Tail {
    pub bytes: Vec<u8>,
    pub cut: bool,
}

impl Tail {
    /// From the start of its first whole line, when it was cut.
    pub fn from_line_start(mut self) -> Vec<u8> {
        if self.cut
            && let Some(i) = self.bytes.iter().position(|b| *b == b'\n')
        {
            self.bytes.drain(..=i);
        }
        self.bytes
    }
}

/// The last `max` bytes of the log at `path`.
pub fn tail(path: &Path, max: u64) -> io::Result<Tail> {
    match find(path)? {
        Found::File(mut f) => {
            let len = f.metadata()?.len();
            let cut = len > max;
            f.seek(SeekFrom::Start(len.saturating_sub(max)))?;
            let mut bytes = Vec::new();
            f.take(max).read_to_end(&mut bytes)?;
            Ok(Tail { bytes, cut })
        }
        Found::Records { file, spans } => {
            let len: u64 = spans.iter().map(|s| u64::from(s.len)).sum();
            let from = len.saturating_sub(max);
            Ok(Tail {
                bytes: read_spans(&file, &spans, from, max)?,
                cut: from > 0,
            })
        }
    }
}

/// The first `max` bytes of the log at `path`.
pub fn head(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    match find(path)? {
        Found::File(f) => {
            let mut bytes = Vec::new();
            f.take(max).read_to_end(&mut bytes)?;
            Ok(bytes)
        }
        Found::Records { file, spans } => read_spans(&file, &spans, 0, max),
    }
}

/// A log read as it grows (`prdloop logs -f`): each [`Follow::next`] gives what was written
/// since, a bounded piece at a time.
pub struct Follow {
    path: PathBuf,
    read: u64,
    file: Option<File>,
}

impl Follow {
    pub fn open(path: &Path) -> io::Result<Follow> {
        let file = match find(path)? {
            Found::File(f) => Some(f),
            Found::Records { .. } => None,
        };
        Ok(Follow {
            path: path.to_path_buf(),
            read: 0,
            file,
        })
    }

    /// Up to `max` bytes written since the last call (empty: none for now).
    pub fn next(&mut self, max: u64) -> io::Result<Vec<u8>> {
        let bytes = match &mut self.file {
            Some(f) => {
                let mut bytes = Vec::new();
                Read::by_ref(f).take(max).read_to_end(&mut bytes)?;
                bytes
            }
            // The records are looked up again: more may have been written.
            None => match find(&self.path)? {
                Found::Records { file, spans } => read_spans(&file, &spans, self.read, max)?,
                Found::File(_) => Vec::new(),
            },
        };
        self.read += bytes.len() as u64;
        Ok(bytes)
    }
}

/// One log of a folder, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// `<folder>/<name>`, as the run named it.
    pub path: PathBuf,
    pub written: Written,
}

/// When a log was last written, for ordering: a file's time, else its last record's place
/// (a folder's records are newer than its files: an earlier prdloop wrote those).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Written {
    File(std::time::SystemTime),
    Record(u64),
}

/// The logs of `dir`: its regular files (but `output.log`) and the logs in its `output.log`.
pub fn list(dir: &Path) -> io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name() == FILE || !e.file_type()?.is_file() {
            continue;
        }
        out.push(Listed {
            path: e.path(),
            written: Written::File(e.metadata()?.modified()?),
        });
    }
    let last = match Book::opened(dir) {
        Some(b) => lock(&b.inner).index.last.clone(),
        None => match open_log(dir) {
            Ok(f) => Index::of(&f)?.last,
            Err(e) if e.kind() == io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => return Err(e),
        },
    };
    out.extend(last.into_iter().map(|(name, at)| Listed {
        path: dir.join(name),
        written: Written::Record(at),
    }));
    Ok(out)
}

/// Copies the logs in `from`'s `output.log` into `to`, as a file each (none when it has none).
pub fn export(from: &Path, to: &Path) -> io::Result<()> {
    let records = list(from)?
        .into_iter()
        .filter(|l| matches!(l.written, Written::Record(_)));
    for l in records {
        let Some(name) = l.path.file_name() else {
            continue;
        };
        let mut out = File::create_new(to.join(name))?;
        let mut follow = Follow::open(&l.path)?;
        loop {
            let piece = follow.next(RECORD_MAX as u64)?;
            if piece.is_empty() {
                break;
            }
            out.write_all(&piece)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
