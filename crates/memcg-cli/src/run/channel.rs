//! The channel between `memcg run`'s server and the init of its pid
//! namespace: framed messages over a Unix stream socket pair (a tag byte,
//! a little-endian `u32` length, the payload).
//!
//! The server tells the init each directory it creates (to remove if the
//! server dies), then `Go` once the machine is mounted, then each signal
//! to forward to CMD. The init answers `Go` with `Ready`. The end of the
//! stream is the other side's death: a server killed by SIGKILL closes
//! its end, and the init takes everything down.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// What the server tells the init.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ToInit {
    /// A directory the server created on the host (for an `--fs`).
    Created(PathBuf),
    /// The machine is mounted (its files are bound at their paths); its
    /// FUSE device is this.
    Go { fuse_dev: u64 },
    /// A signal sent to `memcg run`, for CMD.
    Signal(i32),
}

/// What the init tells the server.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ToServer {
    /// CMD is about to start; the init's seccomp listener for sync(2) and
    /// syncfs(2) is this descriptor of the init (`None`: none could be
    /// made).
    Ready { listener: Option<i32> },
}

const CREATED: u8 = 1;
const GO: u8 = 2;
const SIGNAL: u8 = 3;
const READY: u8 = 4;

/// The largest payload (a path).
const MAX_PAYLOAD: usize = 1 << 16;

/// Sends one frame on `stream`, whole, without SIGPIPE if the other side
/// is gone (`EPIPE` then).
fn send(stream: &UnixStream, tag: u8, payload: &[u8]) -> io::Result<()> {
    let len =
        u32::try_from(payload.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.push(tag);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(payload);
    let mut sent = 0;
    while sent < frame.len() {
        let rest = &frame[sent..];
        // SAFETY: `rest` is valid for its length; the socket is open for
        // the call's duration.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// Reads one frame: `None` at the end of the stream.
fn receive(mut stream: &UnixStream) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match stream.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(io::ErrorKind::InvalidData.into());
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload)?;
    Ok(Some((head[0], payload)))
}

fn invalid() -> io::Error {
    io::ErrorKind::InvalidData.into()
}

impl ToInit {
    pub(super) fn send(&self, stream: &UnixStream) -> io::Result<()> {
        match self {
            ToInit::Created(dir) => send(stream, CREATED, dir.as_os_str().as_bytes()),
            ToInit::Go { fuse_dev } => send(stream, GO, &fuse_dev.to_le_bytes()),
            ToInit::Signal(signal) => send(stream, SIGNAL, &signal.to_le_bytes()),
        }
    }

    /// The next message: `None` once the server is gone.
    pub(super) fn receive(stream: &UnixStream) -> io::Result<Option<Self>> {
        let Some((tag, payload)) = receive(stream)? else {
            return Ok(None);
        };
        Ok(Some(match tag {
            CREATED => ToInit::Created(PathBuf::from(OsString::from_vec(payload))),
            GO => ToInit::Go {
                fuse_dev: u64::from_le_bytes(payload.try_into().map_err(|_| invalid())?),
            },
            SIGNAL => ToInit::Signal(i32::from_le_bytes(
                payload.try_into().map_err(|_| invalid())?,
            )),
            _ => return Err(invalid()),
        }))
    }
}

impl ToServer {
    pub(super) fn send(&self, stream: &UnixStream) -> io::Result<()> {
        match self {
            ToServer::Ready { listener } => {
                send(stream, READY, &listener.unwrap_or(-1).to_le_bytes())
            }
        }
    }

    /// The next message: `None` once the init is gone.
    pub(super) fn receive(stream: &UnixStream) -> io::Result<Option<Self>> {
        let Some((tag, payload)) = receive(stream)? else {
            return Ok(None);
        };
        match tag {
            READY => {
                let fd = i32::from_le_bytes(payload.try_into().map_err(|_| invalid())?);
                Ok(Some(ToServer::Ready {
                    listener: (fd >= 0).then_some(fd),
                }))
            }
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// `message` sent and received.
    fn round_trip(message: ToInit) -> ToInit {
        let (a, b) = UnixStream::pair().unwrap();
        message.send(&a).unwrap();
        ToInit::receive(&b).unwrap().unwrap()
    }

    #[test]
    fn messages_cross_whole_and_the_end_is_seen() {
        let odd = Path::new("/tmp/a dir\nwith a newline");
        for m in [
            ToInit::Created(odd.to_owned()),
            ToInit::Go { fuse_dev: 0x54 },
            ToInit::Signal(libc::SIGTERM),
        ] {
            let expect = format!("{m:?}");
            assert_eq!(format!("{:?}", round_trip(m)), expect);
        }
        let (a, b) = UnixStream::pair().unwrap();
        ToServer::Ready { listener: Some(5) }.send(&b).unwrap();
        ToServer::Ready { listener: None }.send(&b).unwrap();
        drop(b);
        assert_eq!(
            ToServer::receive(&a).unwrap(),
            Some(ToServer::Ready { listener: Some(5) })
        );
        assert_eq!(
            ToServer::receive(&a).unwrap(),
            Some(ToServer::Ready { listener: None })
        );
        assert_eq!(
            ToServer::receive(&a).unwrap(),
            None,
            "the end of the stream"
        );
        assert_eq!(
            ToInit::Signal(1).send(&a).unwrap_err().raw_os_error(),
            Some(libc::EPIPE),
            "no SIGPIPE"
        );
    }
}
