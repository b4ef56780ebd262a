//! A Python package index served by the test itself, over packages the test builds, so the
//! package tests never touch a public index.
//!
//! - [`Wheel`]: a real wheel (PEP 427/491): [`Wheel::pure`] for pure-Python code,
//!   [`Wheel::compiled`] for a CPython extension module built with `cc` for a given interpreter.
//! - [`sdist`]: a source distribution only, whose build backend and `setup.py` leave a marker
//!   file ([`sdist_marker`]) if they ever run, for the wheels-only rule.
//! - [`Index`]: a PEP 503 "simple" index on 127.0.0.1 (a random port) serving those files until
//!   it is dropped, counting page and file requests.
//!
//! The server is plain threaded `std::net`, bounded like everything the tests start: a request
//! line of at most [`MAX_REQUEST_LINE`] bytes and a head of at most [`MAX_HEAD`], read within
//! [`REQUEST_TIMEOUT`]; one request per connection (`Connection: close`); at most
//! [`MAX_CONNECTIONS`] served at once (the next wait to be accepted). Dropping the [`Index`]
//! stops accepting, shuts every open connection down and joins every thread, so the port refuses
//! connections afterwards and nothing is left blocking.

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest request line (method, target, version) the index reads; longer is refused
/// with `414 URI Too Long`.
pub const MAX_REQUEST_LINE: usize = 4096;
/// The longest request head (request line and headers) the index reads; longer is refused with
/// `431 Request Header Fields Too Large`.
pub const MAX_HEAD: usize = 16 * 1024;
/// The time a client has to send its request head; each write of the answer has as long.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How many connections are served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 32;
/// Bound on compiling an extension module and on asking the interpreter about itself.
const BUILD_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Wheels

/// A wheel file: its file name (`{dist}-{ver}-{tag}.whl`) and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wheel {
    pub file_name: String,
    pub bytes: Vec<u8>,
}

impl Wheel {
    /// A pure-Python wheel (tag `py3-none-any`) of project `name` at `version`, holding `files`
    /// (path inside site-packages, contents), with a `Requires-Dist` line for each of
    /// `requires`.
    pub fn pure(name: &str, version: &str, files: &[(&str, &[u8])], requires: &[&str]) -> Wheel {
        let files: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(path, bytes)| ((*path).to_owned(), bytes.to_vec()))
            .collect();
        build_wheel(name, version, "py3-none-any", true, &files, requires, false)
    }

    /// A zip bomb dressed as a pure-Python wheel: `mib` MiB of zeros in one file (an honest
    /// RECORD and header sizes), deflated to about a thousandth of that.
    pub fn bomb(name: &str, version: &str, mib: usize) -> Wheel {
        let module = format!("{}/__init__.py", wheel_name(name));
        let files = vec![
            (module, b"".to_vec()),
            (
                format!("{}/zeros.bin", wheel_name(name)),
                vec![0u8; mib << 20],
            ),
        ];
        build_wheel(name, version, "py3-none-any", true, &files, &[], true)
    }

    /// A wheel holding the CPython extension module `module` compiled from `c_source` with `cc`
    /// for the interpreter `python`: its include directory, `EXT_SUFFIX` and tag
    /// (`cpXY-cpXY-linux_<arch>`) are asked from it with `sysconfig`. The source must define
    /// `PyInit_<module>`. An error names what is missing (a compiler, `Python.h`) and how to
    /// install it.
    pub fn compiled(
        name: &str,
        version: &str,
        module: &str,
        c_source: &str,
        python: &Path,
    ) -> Result<Wheel> {
        let info = Interpreter::ask(python)?;
        let header = info.include.join("Python.h");
        if !header.is_file() {
            bail!(
                "{header:?} is missing, so no extension module can be built for {python:?}: \
                 install the Python headers (`apt-get install python3-dev`)"
            );
        }
        let work = tempfile::Builder::new()
            .prefix("autotool-test-ext-")
            .tempdir()
            .context("creating a directory to compile the extension in")?;
        let source = work.path().join(format!("{module}.c"));
        std::fs::write(&source, c_source).with_context(|| format!("writing {source:?}"))?;
        let so_name = format!("{module}{}", info.ext_suffix);
        let so = work.path().join(&so_name);
        let mut cc = Command::new("cc");
        cc.arg("-shared")
            .arg("-fPIC")
            .arg("-O1")
            .arg("-I")
            .arg(&info.include)
            .arg("-o")
            .arg(&so)
            .arg(&source);
        let run = match run_bounded(&mut cc, work.path(), BUILD_TIMEOUT) {
            Ok(run) => run,
            Err(e) if is_not_found(&e) => bail!(
                "no C compiler (`cc`) to build the extension module {module}: install gcc \
                 (`apt-get install gcc`)"
            ),
            Err(e) => return Err(e.context(format!("compiling {source:?}"))),
        };
        if !run.status.success() {
            bail!(
                "`cc` failed to compile the extension module {module} ({}): {}",
                run.status,
                run.stderr.trim()
            );
        }
        let bytes = std::fs::read(&so).with_context(|| format!("reading {so:?}"))?;
        Ok(build_wheel(
            name,
            version,
            &info.tag,
            false,
            &[(so_name, bytes)],
            &[],
            false,
        ))
    }

    /// sha256 of the bytes, lowercase hex.
    pub fn sha256(&self) -> String {
        sha256_hex(&self.bytes)
    }
}

/// What [`Wheel::compiled`] needs to know about the target interpreter.
struct Interpreter {
    include: PathBuf,
    ext_suffix: String,
    tag: String,
}

impl Interpreter {
    fn ask(python: &Path) -> Result<Interpreter> {
        const ASK: &str = "import json, sys, sysconfig\n\
            print(json.dumps({'include': sysconfig.get_paths()['include'],\n\
            'ext_suffix': sysconfig.get_config_var('EXT_SUFFIX'),\n\
            'platform': sysconfig.get_platform(),\n\
            'implementation': sys.implementation.name,\n\
            'version': [sys.version_info[0], sys.version_info[1]]}))";
        let dir = std::env::temp_dir();
        let run = run_bounded(
            Command::new(python).arg("-I").arg("-c").arg(ASK),
            &dir,
            BUILD_TIMEOUT,
        )
        .with_context(|| format!("asking {python:?} for its sysconfig"))?;
        if !run.status.success() {
            bail!(
                "{python:?} could not report its sysconfig ({}): {}",
                run.status,
                run.stderr.trim()
            );
        }
        let value: serde_json::Value = serde_json::from_str(run.stdout.trim())
            .with_context(|| format!("reading the sysconfig of {python:?}: {}", run.stdout))?;
        let text = |key: &str| {
            value[key]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("{python:?} reported no {key}: {value}"))
        };
        if text("implementation")? != "cpython" {
            bail!("{python:?} is not CPython; extension wheels are built for CPython only");
        }
        let (major, minor) = match (value["version"][0].as_u64(), value["version"][1].as_u64()) {
            (Some(major), Some(minor)) => (major, minor),
            _ => bail!("{python:?} reported no version: {value}"),
        };
        let platform = text("platform")?.replace(['-', '.'], "_");
        Ok(Interpreter {
            include: PathBuf::from(text("include")?),
            ext_suffix: text("ext_suffix")?,
            tag: format!("cp{major}{minor}-cp{major}{minor}-{platform}"),
        })
    }
}

/// A wheel of `files` (paths inside the install root) with its `.dist-info`: METADATA, WHEEL
/// and RECORD, every file hashed in RECORD, entries stored uncompressed (or `deflated`).
fn build_wheel(
    name: &str,
    version: &str,
    tag: &str,
    purelib: bool,
    files: &[(String, Vec<u8>)],
    requires: &[&str],
    deflated: bool,
) -> Wheel {
    let dist = wheel_name(name);
    let dist_info = format!("{dist}-{version}.dist-info");
    let mut metadata = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
    for requirement in requires {
        metadata.push_str(&format!("Requires-Dist: {requirement}\n"));
    }
    let wheel = format!(
        "Wheel-Version: 1.0\nGenerator: autotool-tests\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n"
    );
    let mut entries: Vec<(String, Vec<u8>)> = files.to_vec();
    entries.push((format!("{dist_info}/METADATA"), metadata.into_bytes()));
    entries.push((format!("{dist_info}/WHEEL"), wheel.into_bytes()));
    let mut record = String::new();
    for (path, bytes) in &entries {
        let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(bytes));
        record.push_str(&format!("{path},sha256={digest},{}\n", bytes.len()));
    }
    record.push_str(&format!("{dist_info}/RECORD,,\n"));
    entries.push((format!("{dist_info}/RECORD"), record.into_bytes()));
    Wheel {
        file_name: format!("{dist}-{version}-{tag}.whl"),
        bytes: zip_of(&entries, deflated),
    }
}

/// A zip archive of `entries`, stored (no compression) unless `deflated`, regular files `0644`
/// (`0755` for shared objects).
fn zip_of(entries: &[(String, Vec<u8>)], deflated: bool) -> Vec<u8> {
    use zip::write::SimpleFileOptions;
    let method = if deflated {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let written: zip::result::ZipResult<()> = entries.iter().try_for_each(|(path, bytes)| {
        let mode = if path.ends_with(".so") { 0o755 } else { 0o644 };
        let options = SimpleFileOptions::default()
            .compression_method(method)
            .unix_permissions(mode);
        writer.start_file(path.as_str(), options)?;
        writer.write_all(bytes)?;
        Ok(())
    });
    // Writing into memory fails only on an impossible archive (a duplicate path, over 4 GiB):
    // a fixture bug, so a panic naming it is the right report.
    match written.and_then(|()| writer.finish()) {
        Ok(cursor) => cursor.into_inner(),
        Err(e) => panic!("writing a wheel into memory: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Source distributions

/// A source distribution only: `{name}-{version}.tar.gz` (name normalised as for a wheel), a
/// minimal valid sdist with `PKG-INFO`, a `pyproject.toml` naming an in-tree build backend that
/// needs nothing installed, and a `setup.py`. The backend builds a working wheel (a module
/// `<name>_from_sdist`), so whatever refuses this package is the wheels-only rule and not a
/// broken sdist; importing the backend or running `setup.py` appends a line to
/// [`sdist_marker`]`(name, version)`, so a test can show that no build script ran. Any marker
/// left from an earlier call is removed.
pub fn sdist(name: &str, version: &str) -> (String, Vec<u8>) {
    let dist = wheel_name(name);
    let base = format!("{dist}-{version}");
    let marker = sdist_marker(name, version);
    let _ = std::fs::remove_file(&marker);
    // A JSON string of an ASCII path is a valid Python string literal.
    let marker_literal =
        serde_json::Value::String(marker.to_string_lossy().into_owned()).to_string();
    let pkg_info = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
    let pyproject = "[build-system]\nrequires = []\nbuild-backend = \"backend\"\n\
                     backend-path = [\".\"]\n"
        .to_owned();
    let backend = format!(
        r#""""In-tree build backend of a test sdist: it records that it ran, then builds a wheel."""
import base64, hashlib, os, zipfile

with open({marker_literal}, "a") as f:
    f.write("build backend imported in %s\n" % os.getcwd())

NAME = {name:?}
DIST = {dist:?}
VERSION = {version:?}
INFO = "%s-%s.dist-info" % (DIST, VERSION)
FILES = {{
    "%s_from_sdist.py" % DIST: b"built = True\n",
    INFO + "/METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (NAME, VERSION)).encode(),
    INFO + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: sdist-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}}

def get_requires_for_build_wheel(config_settings=None):
    return []

def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    os.makedirs(os.path.join(metadata_directory, INFO))
    for path in ("METADATA", "WHEEL"):
        with open(os.path.join(metadata_directory, INFO, path), "wb") as f:
            f.write(FILES[INFO + "/" + path])
    return INFO

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    file_name = "%s-%s-py3-none-any.whl" % (DIST, VERSION)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, file_name), "w") as z:
        for path, data in FILES.items():
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
        record.append(INFO + "/RECORD,,")
        z.writestr(INFO + "/RECORD", "\n".join(record) + "\n")
    return file_name
"#
    );
    let setup = format!(
        "with open({marker_literal}, \"a\") as f:\n    f.write(\"setup.py ran\\n\")\n\n\
         from setuptools import setup\n\nsetup(name={name:?}, version={version:?})\n"
    );
    let entries = [
        ("PKG-INFO", pkg_info),
        ("pyproject.toml", pyproject),
        ("backend.py", backend),
        ("setup.py", setup),
    ];
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    let written: std::io::Result<Vec<u8>> = (|| {
        for (path, text) in &entries {
            let mut header = tar::Header::new_ustar();
            header.set_size(text.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_entry_type(tar::EntryType::Regular);
            builder.append_data(&mut header, format!("{base}/{path}"), text.as_bytes())?;
        }
        builder.into_inner()?.finish()
    })();
    // Only a path over the ustar limits could fail, in memory: a fixture bug.
    match written {
        Ok(bytes) => (format!("{base}.tar.gz"), bytes),
        Err(e) => panic!("writing the sdist {base} into memory: {e}"),
    }
}

/// The file the build scripts of [`sdist`]`(name, version)` append to when they run: in the
/// system temporary directory, named for this process, the project and the version.
pub fn sdist_marker(name: &str, version: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "autotool-test-sdist-ran-{}-{}-{version}",
        std::process::id(),
        wheel_name(name)
    ))
}

// ---------------------------------------------------------------------------------------------
// Names and hashes

/// A project name normalised per PEP 503: runs of `-`, `_`, `.` become `-`, lowercase.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(c.to_lowercase());
            in_run = false;
        }
    }
    out
}

/// The distribution part of a wheel or sdist file name: normalised, `_` for `-`.
fn wheel_name(name: &str) -> String {
    normalize(name).replace('-', "_")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Bounded commands

/// What a command run by [`run_bounded`] left.
#[derive(Debug)]
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Run `command` with its output in files under `dir`, killed (with its process group) if it
/// takes longer than `timeout`.
fn run_bounded(command: &mut Command, dir: &Path, timeout: Duration) -> Result<Ran> {
    use std::os::unix::process::CommandExt as _;
    let out = tempfile::tempfile_in(dir).context("creating a file for stdout")?;
    let err = tempfile::tempfile_in(dir).context("creating a file for stderr")?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(err.try_clone()?)
        .process_group(0)
        .spawn()?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            if let Ok(pid) = i32::try_from(child.id())
                && let Some(pid) = rustix::process::Pid::from_raw(pid)
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            bail!("{command:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let read = |mut file: std::fs::File| -> Result<String> {
        use std::io::Seek as _;
        file.rewind()?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    Ok(Ran {
        status,
        stdout: read(out)?,
        stderr: read(err)?,
    })
}

fn is_not_found(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

// ---------------------------------------------------------------------------------------------
// The index

/// One stored file.
#[derive(Debug)]
struct Stored {
    bytes: Vec<u8>,
    sha256: String,
}

/// What the index serves: file names per normalised project, and the files.
#[derive(Debug, Default)]
struct Catalog {
    projects: BTreeMap<String, BTreeSet<String>>,
    files: BTreeMap<String, Arc<Stored>>,
}

#[derive(Debug, Default)]
struct Shared {
    catalog: Mutex<Catalog>,
    downloads: AtomicUsize,
    pages: AtomicUsize,
    stop: AtomicBool,
    active: AtomicUsize,
    next_id: AtomicU64,
    /// A handle on every open connection, so stopping can shut them down.
    open: Mutex<HashMap<u64, TcpStream>>,
}

impl Shared {
    fn catalog(&self) -> MutexGuard<'_, Catalog> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn open(&self) -> MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A PEP 503 simple index on 127.0.0.1 (a random port), serving until dropped:
/// `/simple/` lists the projects, `/simple/<normalised name>/` links each of its files as
/// `<a href="/files/<file>#sha256=<hex>">file</a>`, `/files/<file>` serves the bytes; anything
/// else is `404`. `GET` and `HEAD` only.
pub struct Index {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("addr", &self.addr)
            .field("pages", &self.pages())
            .field("downloads", &self.downloads())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Bind 127.0.0.1 on a free port and start serving (nothing is listed yet).
    pub fn start() -> Result<Index> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the test index")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let acceptor = std::thread::Builder::new()
            .name("test-index".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&listener, &shared)
            })
            .context("starting the test index")?;
        Ok(Index {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// Add a file (a wheel or an sdist) under project `name` (normalised per PEP 503); may be
    /// called while serving. A file of the same name replaces the earlier one.
    pub fn add(&self, name: &str, file_name: &str, bytes: Vec<u8>) {
        let stored = Arc::new(Stored {
            sha256: sha256_hex(&bytes),
            bytes,
        });
        let mut catalog = self.shared.catalog();
        catalog
            .projects
            .entry(normalize(name))
            .or_default()
            .insert(file_name.to_owned());
        catalog.files.insert(file_name.to_owned(), stored);
    }

    /// [`Self::add`] of a wheel.
    pub fn add_wheel(&self, name: &str, wheel: &Wheel) {
        self.add(name, &wheel.file_name, wheel.bytes.clone());
    }

    /// `http://127.0.0.1:<port>/simple`
    pub fn url(&self) -> String {
        format!("http://{}/simple", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many `GET /files/...` requests were answered with the file's bytes (downloads).
    pub fn downloads(&self) -> usize {
        self.shared.downloads.load(Ordering::SeqCst)
    }

    /// How many requests for `/simple` pages were answered, found or not.
    pub fn pages(&self) -> usize {
        self.shared.pages.load(Ordering::SeqCst)
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Accept until told to stop, at most [`MAX_CONNECTIONS`] served at once; then shut every open
/// connection down and join its thread. The listener is closed when this returns.
fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        workers.retain(|w| !w.is_finished());
        if shared.active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        match crate::host::wait_readable(listener, Duration::from_millis(50)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        }
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        shared.open().insert(id, handle);
        shared.active.fetch_add(1, Ordering::SeqCst);
        let worker = std::thread::Builder::new()
            .name("test-index-conn".into())
            .spawn({
                let shared = Arc::clone(shared);
                move || {
                    serve_connection(stream, &shared);
                    shared.open().remove(&id);
                    shared.active.fetch_sub(1, Ordering::SeqCst);
                }
            });
        match worker {
            Ok(worker) => workers.push(worker),
            Err(_) => {
                shared.open().remove(&id);
                shared.active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
    for (_, stream) in shared.open().drain() {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    for worker in workers {
        let _ = worker.join();
    }
}

/// Why a request head could not be read.
enum HeadError {
    LineTooLong,
    HeadTooLong,
    /// Closed, timed out or failed: nothing to answer.
    Gone,
}

/// Read the request head (up to the blank line) within [`REQUEST_TIMEOUT`], bounded by
/// [`MAX_REQUEST_LINE`] and [`MAX_HEAD`].
fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(HeadError::Gone);
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(HeadError::Gone),
            Ok(n) => n,
        };
        head.extend_from_slice(&chunk[..n]);
        match head.iter().position(|&b| b == b'\n') {
            Some(end) if end > MAX_REQUEST_LINE => return Err(HeadError::LineTooLong),
            None if head.len() > MAX_REQUEST_LINE => return Err(HeadError::LineTooLong),
            _ => {}
        }
        if let Some(end) = find(&head, b"\r\n\r\n")
            .map(|i| i + 4)
            .or_else(|| find(&head, b"\n\n").map(|i| i + 2))
        {
            if end > MAX_HEAD {
                return Err(HeadError::HeadTooLong);
            }
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(HeadError::HeadTooLong);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An answer: status line, content type, body.
struct Answer {
    status: &'static str,
    content_type: &'static str,
    body: Arc<Vec<u8>>,
    /// Counted as a download once its bytes are sent.
    download: bool,
}

impl Answer {
    fn text(status: &'static str, body: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Arc::new(format!("{body}\n").into_bytes()),
            download: false,
        }
    }
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let (answer, head_only) = match read_head(&mut stream) {
        Ok(head) => route(&head, shared),
        Err(HeadError::LineTooLong) => (
            Answer::text("414 URI Too Long", "request line too long"),
            false,
        ),
        Err(HeadError::HeadTooLong) => (
            Answer::text(
                "431 Request Header Fields Too Large",
                "request head too long",
            ),
            false,
        ),
        Err(HeadError::Gone) => return,
    };
    // As a real index answers: a file never changes (its name and hash pin it), so a client
    // may keep it; a project page does (a release is added), so it is asked again each time.
    let cache = if answer.download {
        "max-age=365000000, immutable, public"
    } else {
        "max-age=0, must-revalidate"
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: {cache}\r\n\
         Connection: close\r\n\r\n",
        answer.status,
        answer.content_type,
        answer.body.len()
    );
    let sent = stream.write_all(head.as_bytes()).is_ok()
        && (head_only || stream.write_all(&answer.body).is_ok())
        && stream.flush().is_ok();
    if sent && answer.download && !head_only {
        shared.downloads.fetch_add(1, Ordering::SeqCst);
    }
    // Close gently: end our side, then drain (bounded) what the client still sends, so the
    // kernel does not answer unread bytes with a reset that could discard the response.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 4096];
    let mut drained = 0usize;
    while drained < 1 << 20 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// The answer to a request head, and whether it is a `HEAD` request (no body sent).
fn route(head: &[u8], shared: &Shared) -> (Answer, bool) {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (
            Answer::text("400 Bad Request", "malformed request line"),
            false,
        );
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return (
            Answer::text("400 Bad Request", "malformed request line"),
            false,
        );
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return (
                Answer::text("405 Method Not Allowed", "GET or HEAD only"),
                false,
            );
        }
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    let Some(path) = percent_decode(path) else {
        return (
            Answer::text("400 Bad Request", "malformed percent-encoding"),
            head_only,
        );
    };
    (answer_for(&path, shared), head_only)
}

fn answer_for(path: &str, shared: &Shared) -> Answer {
    if let Some(file) = path.strip_prefix("/files/") {
        let stored = shared.catalog().files.get(file).cloned();
        return match stored {
            Some(stored) => Answer {
                status: "200 OK",
                content_type: "application/octet-stream",
                body: Arc::new(stored.bytes.clone()),
                download: true,
            },
            None => Answer::text("404 Not Found", "no such file"),
        };
    }
    let Some(rest) = path
        .strip_prefix("/simple")
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
    else {
        return Answer::text("404 Not Found", "not found");
    };
    shared.pages.fetch_add(1, Ordering::SeqCst);
    let project = rest.trim_matches('/');
    let catalog = shared.catalog();
    let html = if project.is_empty() {
        let links: String = catalog
            .projects
            .keys()
            .map(|p| format!("<a href=\"/simple/{}/\">{}</a><br/>\n", href(p), html(p)))
            .collect();
        page("Simple index", &links)
    } else if project.contains('/') {
        return Answer::text("404 Not Found", "not found");
    } else {
        let name = normalize(project);
        let Some(files) = catalog.projects.get(&name) else {
            return Answer::text("404 Not Found", "no such project");
        };
        let links: String = files
            .iter()
            .filter_map(|f| catalog.files.get(f).map(|s| (f, s)))
            .map(|(f, s)| {
                format!(
                    "<a href=\"/files/{}#sha256={}\">{}</a><br/>\n",
                    href(f),
                    s.sha256,
                    html(f)
                )
            })
            .collect();
        page(&format!("Links for {name}"), &links)
    };
    Answer {
        status: "200 OK",
        content_type: "text/html; charset=utf-8",
        body: Arc::new(html.into_bytes()),
        download: false,
    }
}

fn page(title: &str, body: &str) -> String {
    let title = html(title);
    format!(
        "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">\
         <title>{title}</title></head>\n<body><h1>{title}</h1>\n{body}</body></html>\n"
    )
}

/// `text` escaped for HTML text and attribute values.
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `segment` percent-encoded for a URL path segment (everything but unreserved characters).
fn href(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `path` with `%XX` decoded; `None` for a malformed escape or bytes that are not UTF-8.
fn percent_decode(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    //! The fixture against the real client: uv resolves, locks and installs from the index
    //! exactly as autotool will, each run in a directory of its own with its own cache, no
    //! configuration files and no UV_*/PIP_* or proxy variables from the environment.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::locate;

    /// Bound on one uv or Python run.
    const RUN_TIMEOUT: Duration = Duration::from_secs(120);

    /// A scratch directory with a uv cache of its own, and the runtime's Python.
    struct Uv {
        dir: tempfile::TempDir,
        uv: PathBuf,
        python: PathBuf,
    }

    impl Uv {
        fn new() -> Uv {
            let dir = tempfile::Builder::new()
                .prefix("autotool-test-index-")
                .tempdir()
                .unwrap();
            Uv {
                dir,
                uv: locate::uv().unwrap(),
                python: locate::runtime().unwrap().python,
            }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.path(name);
            std::fs::write(&path, text).unwrap();
            path
        }

        /// `uv <args> --no-config --index-url <index>` with a scrubbed environment.
        fn run(&self, index: &Index, args: &[&str]) -> Ran {
            let mut command = Command::new(&self.uv);
            for (key, _) in std::env::vars_os() {
                let key_text = key.to_string_lossy().to_ascii_uppercase();
                if key_text.starts_with("UV_")
                    || key_text.starts_with("PIP_")
                    || key_text.ends_with("_PROXY")
                {
                    command.env_remove(&key);
                }
            }
            command
                .args(args)
                .args(["--no-config", "--no-python-downloads", "--index-url"])
                .arg(index.url())
                .current_dir(self.dir.path())
                .env("UV_CACHE_DIR", self.path("cache"))
                .env("HOME", self.dir.path())
                .env("NO_COLOR", "1");
            let ran = run_bounded(&mut command, self.dir.path(), RUN_TIMEOUT).unwrap();
            eprintln!(
                "uv {}: {}\n--- stdout\n{}--- stderr\n{}",
                args.join(" "),
                ran.status,
                ran.stdout,
                ran.stderr
            );
            ran
        }

        /// `uv pip compile --generate-hashes --only-binary :all:` of `requirements`.
        fn compile(&self, index: &Index, requirements: &str) -> Ran {
            let input = self.write("requirements.in", requirements);
            let python = self.python.to_str().unwrap().to_owned();
            self.run(
                index,
                &[
                    "pip",
                    "compile",
                    "--quiet",
                    "--generate-hashes",
                    "--only-binary",
                    ":all:",
                    "--python",
                    &python,
                    input.to_str().unwrap(),
                ],
            )
        }

        /// `uv pip install --target <target> --require-hashes --only-binary :all: --no-deps -r
        /// <lock>`.
        fn install(&self, index: &Index, lock: &str, target: &Path) -> Ran {
            let lock = self.write("requirements.lock", lock);
            let python = self.python.to_str().unwrap().to_owned();
            self.run(
                index,
                &[
                    "pip",
                    "install",
                    "--quiet",
                    "--python",
                    &python,
                    "--target",
                    target.to_str().unwrap(),
                    "--require-hashes",
                    "--only-binary",
                    ":all:",
                    "--no-deps",
                    "-r",
                    lock.to_str().unwrap(),
                ],
            )
        }

        /// The runtime's Python, isolated, with `target` appended to `sys.path`, running `code`.
        fn python_with(&self, target: &Path, code: &str) -> Ran {
            let code = format!(
                "import sys; sys.path.append({}); {code}",
                serde_json::Value::String(target.to_str().unwrap().to_owned())
            );
            let ran = run_bounded(
                Command::new(&self.python).arg("-I").arg("-c").arg(&code),
                self.dir.path(),
                RUN_TIMEOUT,
            )
            .unwrap();
            eprintln!(
                "python -c {code:?}: {}\n{}{}",
                ran.status, ran.stdout, ran.stderr
            );
            ran
        }
    }

    /// An index with `alpha-pkg` 1.0 (requiring `beta_dep>=2`) and `beta_dep` 1.0 and 2.1.
    fn two_pure_wheels() -> (Index, Wheel, Wheel, Wheel) {
        let index = Index::start().unwrap();
        let alpha = Wheel::pure(
            "alpha-pkg",
            "1.0",
            &[(
                "alpha/__init__.py",
                b"import beta\nx = 'alpha 1.0 with ' + beta.y\n",
            )],
            &["beta_dep>=2"],
        );
        let beta_old = Wheel::pure(
            "beta_dep",
            "1.0",
            &[("beta/__init__.py", b"y = 'beta 1.0'\n")],
            &[],
        );
        let beta = Wheel::pure(
            "beta_dep",
            "2.1",
            &[("beta/__init__.py", b"y = 'beta 2.1'\n")],
            &[],
        );
        index.add_wheel("alpha-pkg", &alpha);
        index.add_wheel("beta_dep", &beta_old);
        index.add_wheel("Beta.Dep", &beta);
        (index, alpha, beta_old, beta)
    }

    /// The lock's `name==version` lines with their hashes, in order.
    fn pins(lock: &str) -> Vec<(String, Vec<String>)> {
        let mut pins: Vec<(String, Vec<String>)> = Vec::new();
        for line in lock.lines() {
            let line = line.trim().trim_end_matches('\\').trim();
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(hash) = line.strip_prefix("--hash=sha256:") {
                pins.last_mut().unwrap().1.push(hash.to_owned());
            } else {
                pins.push((line.to_owned(), Vec::new()));
            }
        }
        pins
    }

    #[test]
    fn uv_compiles_a_hashed_lock_of_a_wheel_and_its_dependency() {
        let start = Instant::now();
        let (index, alpha, beta_old, beta) = two_pure_wheels();
        assert_eq!(alpha.file_name, "alpha_pkg-1.0-py3-none-any.whl");
        assert_eq!(beta.file_name, "beta_dep-2.1-py3-none-any.whl");
        let uv = Uv::new();
        let ran = uv.compile(&index, "alpha-pkg==1.0\n");
        assert!(ran.status.success(), "{}", ran.stderr);
        assert_eq!(
            pins(&ran.stdout),
            vec![
                ("alpha-pkg==1.0".to_owned(), vec![alpha.sha256()]),
                ("beta-dep==2.1".to_owned(), vec![beta.sha256()]),
            ],
            "{}",
            ran.stdout
        );
        assert!(!ran.stdout.contains(&beta_old.sha256()));
        assert!(index.pages() >= 2, "pages: {}", index.pages());
        eprintln!("compile: {:?}", start.elapsed());
    }

    #[test]
    fn uv_installs_the_lock_into_a_target_the_runtime_imports() {
        let start = Instant::now();
        let (index, _, _, beta) = two_pure_wheels();
        let uv = Uv::new();
        let ran = uv.compile(&index, "alpha-pkg==1.0\n");
        assert!(ran.status.success(), "{}", ran.stderr);
        let lock = ran.stdout;

        // Control: the lock's hashes are checked. A lock naming another hash for beta-dep is
        // refused and installs nothing.
        let tampered_target = uv.path("tampered");
        let tampered = lock.replace(&beta.sha256(), &sha256_hex(b"something else"));
        assert_ne!(tampered, lock);
        let ran = uv.install(&index, &tampered, &tampered_target);
        assert!(!ran.status.success(), "a lock with a wrong hash installed");
        assert!(
            ran.stderr.to_lowercase().contains("hash"),
            "the refusal does not name the hash: {}",
            ran.stderr
        );
        let ran = uv.python_with(&tampered_target, "import alpha");
        assert!(
            !ran.status.success(),
            "alpha importable after a refused install"
        );

        let downloads = index.downloads();
        let target = uv.path("target");
        let ran = uv.install(&index, &lock, &target);
        assert!(ran.status.success(), "{}", ran.stderr);
        assert!(target.join("alpha/__init__.py").is_file());
        assert!(target.join("beta_dep-2.1.dist-info/RECORD").is_file());
        let ran = uv.python_with(&target, "import alpha; print(alpha.x)");
        assert!(ran.status.success(), "{}", ran.stderr);
        assert_eq!(ran.stdout, "alpha 1.0 with beta 2.1\n");
        // Installs read from uv's cache when they can; the bytes came from this index either
        // way (the compile downloaded them).
        assert!(
            index.downloads() >= 2,
            "downloads: {downloads} then {}",
            index.downloads()
        );
        eprintln!(
            "compile, refused install, install, import: {:?}",
            start.elapsed()
        );
    }

    const EXTENSION: &str = r#"
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *answer(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyLong_FromLong(6 * 7);
}

static PyMethodDef methods[] = {
    {"answer", answer, METH_NOARGS, "The answer, computed in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcalc", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastcalc(void) { return PyModule_Create(&module); }
"#;

    #[test]
    fn a_compiled_extension_wheel_installs_and_runs() {
        let start = Instant::now();
        let uv = Uv::new();
        let wheel = Wheel::compiled("fastcalc", "0.3", "fastcalc", EXTENSION, &uv.python).unwrap();
        let built = start.elapsed();
        let info = Interpreter::ask(&uv.python).unwrap();
        assert_eq!(wheel.file_name, format!("fastcalc-0.3-{}.whl", info.tag));
        assert!(info.tag.starts_with("cp3"), "{}", info.tag);
        let index = Index::start().unwrap();
        index.add_wheel("fastcalc", &wheel);
        let ran = uv.compile(&index, "fastcalc\n");
        assert!(ran.status.success(), "{}", ran.stderr);
        assert_eq!(
            pins(&ran.stdout),
            vec![("fastcalc==0.3".to_owned(), vec![wheel.sha256()])]
        );
        let target = uv.path("target");
        let ran = uv.install(&index, &ran.stdout, &target);
        assert!(ran.status.success(), "{}", ran.stderr);
        let ran = uv.python_with(
            &target,
            "import fastcalc; print(fastcalc.answer()); print(fastcalc.__file__)",
        );
        assert!(ran.status.success(), "{}", ran.stderr);
        let so = target.join(format!("fastcalc{}", info.ext_suffix));
        assert_eq!(ran.stdout, format!("42\n{}\n", so.display()));
        eprintln!(
            "compiled in {built:?}; built, locked, installed, called: {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn pip_installs_the_wheels_too() {
        let uv = Uv::new();
        let wheel = Wheel::pure("gamma", "0.2", &[("gamma.py", b"z = 'gamma 0.2'\n")], &[]);
        let compiled =
            Wheel::compiled("fastcalc", "0.3", "fastcalc", EXTENSION, &uv.python).unwrap();
        let target = uv.path("target");
        let mut command = Command::new(&uv.python);
        command.args([
            "-I",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
        ]);
        command.arg("--target").arg(&target);
        for w in [&wheel, &compiled] {
            let file = uv.path(&w.file_name);
            std::fs::write(&file, &w.bytes).unwrap();
            command.arg(file);
        }
        for (key, _) in std::env::vars_os() {
            if key
                .to_string_lossy()
                .to_ascii_uppercase()
                .starts_with("PIP_")
            {
                command.env_remove(&key);
            }
        }
        let ran = run_bounded(&mut command, uv.dir.path(), RUN_TIMEOUT).unwrap();
        assert!(ran.status.success(), "{}{}", ran.stdout, ran.stderr);
        let ran = uv.python_with(
            &target,
            "import gamma, fastcalc; print(gamma.z, fastcalc.answer())",
        );
        assert_eq!(ran.stdout, "gamma 0.2 42\n", "{}", ran.stderr);
    }

    #[test]
    fn compiled_names_a_missing_interpreter() {
        let err = Wheel::compiled("x", "1", "x", EXTENSION, Path::new("/nonexistent/python3"))
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("/nonexistent/python3"),
            "{err:#}"
        );
    }

    #[test]
    fn an_sdist_only_project_is_refused_and_its_build_never_runs() {
        let start = Instant::now();
        let index = Index::start().unwrap();
        let (file, bytes) = sdist("srconly", "1.0");
        assert_eq!(file, "srconly-1.0.tar.gz");
        index.add("srconly", &file, bytes);
        let marker = sdist_marker("srconly", "1.0");
        let uv = Uv::new();

        let ran = uv.compile(&index, "srconly\n");
        assert!(
            !ran.status.success(),
            "an sdist-only project resolved: {}",
            ran.stdout
        );
        assert!(
            ran.stderr.contains("no usable wheels") || ran.stderr.contains("no wheels"),
            "the refusal does not say there is no wheel: {}",
            ran.stderr
        );
        assert!(
            !marker.exists(),
            "a build script ran: {:?}",
            std::fs::read_to_string(&marker)
        );

        // Control: without the wheels-only rule the same sdist builds, and its build backend
        // leaves the marker, so its absence above means nothing ran.
        let input = uv.write("control.in", "srconly\n");
        let python = uv.python.to_str().unwrap().to_owned();
        let ran = uv.run(
            &index,
            &[
                "pip",
                "compile",
                "--quiet",
                "--python",
                &python,
                input.to_str().unwrap(),
            ],
        );
        assert!(ran.status.success(), "{}", ran.stderr);
        assert!(ran.stdout.contains("srconly==1.0"), "{}", ran.stdout);
        let ran_scripts = std::fs::read_to_string(&marker).unwrap();
        assert!(
            ran_scripts.contains("build backend imported"),
            "{ran_scripts}"
        );
        let _ = std::fs::remove_file(&marker);
        eprintln!("refused, then built as the control: {:?}", start.elapsed());
    }

    /// One raw request; the whole answer.
    fn request(addr: SocketAddr, raw: &[u8]) -> String {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        stream.write_all(raw).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        request(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
    }

    #[test]
    fn the_index_serves_pages_and_files_and_refuses_the_rest() {
        let index = Index::start().unwrap();
        let wheel = Wheel::pure("Foo.Bar_baz", "0.1", &[("foo.py", b"x = 1\n")], &[]);
        index.add_wheel("Foo.Bar_baz", &wheel);
        let addr = index.addr();
        assert_eq!(
            index.url(),
            format!("http://127.0.0.1:{}/simple", addr.port())
        );

        let root = get(addr, "/simple/");
        assert!(root.starts_with("HTTP/1.1 200 OK\r\n"), "{root}");
        assert!(
            root.contains("<a href=\"/simple/foo-bar-baz/\">foo-bar-baz</a>"),
            "{root}"
        );
        let page = get(addr, "/simple/foo-bar-baz/");
        let link = format!(
            "<a href=\"/files/{0}#sha256={1}\">{0}</a>",
            wheel.file_name,
            wheel.sha256()
        );
        assert!(page.contains(&link), "{page}");
        // A name that is not normalised is found under its normal form.
        assert!(get(addr, "/simple/Foo_Bar.baz/").contains(&link));
        assert_eq!(index.pages(), 3);

        let file = request(
            addr,
            format!("GET /files/{} HTTP/1.1\r\n\r\n", wheel.file_name).as_bytes(),
        );
        assert!(file.starts_with("HTTP/1.1 200 OK\r\n"), "{file}");
        assert!(file.contains(&format!("Content-Length: {}\r\n", wheel.bytes.len())));
        assert_eq!(index.downloads(), 1);
        let head = request(
            addr,
            format!("HEAD /files/{} HTTP/1.1\r\n\r\n", wheel.file_name).as_bytes(),
        );
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        assert_eq!(index.downloads(), 1, "a HEAD is no download");

        for path in [
            "/simple/unknown/",
            "/files/unknown.whl",
            "/",
            "/simplex",
            "/simple/a/b/",
        ] {
            let answer = get(addr, path);
            assert!(
                answer.starts_with("HTTP/1.1 404 Not Found\r\n"),
                "{path}: {answer}"
            );
        }
        let post = request(addr, b"POST /simple/ HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        assert_eq!(index.downloads(), 1);
    }

    #[test]
    fn the_index_refuses_an_oversized_head_and_keeps_serving() {
        let index = Index::start().unwrap();
        let addr = index.addr();
        // Control: a request just under the cap is served.
        let fits = format!("/simple/{}", "a".repeat(MAX_REQUEST_LINE - 40));
        assert!(get(addr, &fits).starts_with("HTTP/1.1 404 "));

        let long_line = format!(
            "GET /simple/{} HTTP/1.1\r\n\r\n",
            "a".repeat(MAX_REQUEST_LINE)
        );
        let answer = request(addr, long_line.as_bytes());
        assert!(answer.starts_with("HTTP/1.1 414 "), "{answer}");
        // No newline at all: refused once the cap is read, not waited on forever.
        let answer = request(addr, &vec![b'a'; 3 * MAX_REQUEST_LINE]);
        assert!(answer.starts_with("HTTP/1.1 414 "), "{answer}");
        let many_headers = format!(
            "GET /simple/ HTTP/1.1\r\n{}\r\n",
            "X-Filler: 0123456789012345678901234567890123456789\r\n".repeat(MAX_HEAD / 40)
        );
        let answer = request(addr, many_headers.as_bytes());
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");

        // A client that sends nothing holds no one up.
        let _idle = TcpStream::connect(addr).unwrap();
        assert!(get(addr, "/simple/").starts_with("HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn dropping_the_index_stops_it() {
        let index = Index::start().unwrap();
        let addr = index.addr();
        assert!(get(addr, "/simple/").starts_with("HTTP/1.1 200 OK\r\n"));
        // Control for the refusal below: an open, idle connection while it serves.
        let idle = TcpStream::connect(addr).unwrap();
        let start = Instant::now();
        drop(index);
        let stopped = start.elapsed();
        assert!(stopped < Duration::from_secs(5), "drop took {stopped:?}");
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
        // The idle connection was shut down, not left to its timeout.
        idle.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 16];
        let read = (&idle).read(&mut buf);
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(!matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
        eprintln!("stopped in {stopped:?}");
    }

    #[test]
    fn names_are_normalised_per_pep_503() {
        assert_eq!(normalize("Foo.Bar__baz-Qux"), "foo-bar-baz-qux");
        assert_eq!(wheel_name("Foo.Bar__baz-Qux"), "foo_bar_baz_qux");
        assert_eq!(percent_decode("/a%2Bb"), Some("/a+b".to_owned()));
        assert_eq!(percent_decode("/a%2"), None);
        assert_eq!(href("a+b 1"), "a%2Bb%201");
    }
}
