//! The tool's network namespace: only `lo`, brought up, and the egress listener.
//!
//! The listener is bound inside the namespace on 127.0.0.1 and ::1 and both descriptors are sent
//! to the parent over the policy's report socket (`SCM_RIGHTS`), so the supervisor serves the
//! proxy from the host side and the socket itself identifies the tool. The launcher keeps no copy.
//! There is no other interface, no route and no resolver.

use crate::error::{LaunchError, last};
use autotool_policy::Plan;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Host name, loopback, egress listener.
pub fn setup(plan: &Plan) -> Result<(), LaunchError> {
    let name = plan.hostname.as_bytes();
    // SAFETY: name points to name.len() valid bytes.
    if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } != 0 {
        return Err(LaunchError::Hostname(last()));
    }
    loopback_up()?;
    if let Some(egress) = &plan.egress {
        let v4 = listen(libc::AF_INET, egress.port)?;
        let v6 = listen(libc::AF_INET6, egress.port)?;
        send_fds(egress.report_fd, &[v4.as_raw_fd(), v6.as_raw_fd()])?;
        // SAFETY: the report socket was handed to us for this one message; nothing uses it after.
        unsafe { libc::close(egress.report_fd) };
    }
    Ok(())
}

fn socket(domain: libc::c_int, ty: libc::c_int) -> Result<OwnedFd, std::io::Error> {
    // SAFETY: socket has no memory-safety preconditions.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn loopback_up() -> Result<(), LaunchError> {
    let sock = socket(libc::AF_INET, libc::SOCK_DGRAM).map_err(LaunchError::Loopback)?;
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we pass, which is valid.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(LaunchError::Loopback(last()));
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(LaunchError::Loopback(last()));
        }
    }
    Ok(())
}

fn listen(domain: libc::c_int, port: u16) -> Result<OwnedFd, LaunchError> {
    let addr = if domain == libc::AF_INET {
        format!("127.0.0.1:{port}")
    } else {
        format!("[::1]:{port}")
    };
    let fail = |source| LaunchError::EgressBind {
        addr: addr.clone(),
        source,
    };
    let sock = socket(domain, libc::SOCK_STREAM).map_err(fail)?;
    let one: libc::c_int = 1;
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the option value points to a valid c_int of the given length.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            len,
        );
        if domain == libc::AF_INET6 {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&one as *const libc::c_int).cast(),
                len,
            );
        }
    }
    let rc = if domain == libc::AF_INET {
        // SAFETY: sockaddr_in is plain data; zeroed is valid and every used field is set.
        let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_port = port.to_be();
        sa.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        // SAFETY: sa is a valid sockaddr_in and the length matches it.
        unsafe {
            libc::bind(
                sock.as_raw_fd(),
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
    } else {
        // SAFETY: sockaddr_in6 is plain data; zeroed is valid and every used field is set.
        let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sa.sin6_port = port.to_be();
        sa.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
        // SAFETY: sa is a valid sockaddr_in6 and the length matches it.
        unsafe {
            libc::bind(
                sock.as_raw_fd(),
                (&sa as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    };
    if rc != 0 {
        return Err(fail(last()));
    }
    // SAFETY: listen on a bound socket we own.
    if unsafe { libc::listen(sock.as_raw_fd(), 128) } != 0 {
        return Err(fail(last()));
    }
    Ok(sock)
}

/// Send `fds` in one message with a one-byte payload.
fn send_fds(socket: i32, fds: &[i32]) -> Result<(), LaunchError> {
    let payload = [b'L'];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let data_len = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; zeroed is valid and the used fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer is CMSG_SPACE(data_len) bytes, enough for one header carrying
    // `fds`; CMSG_FIRSTHDR/CMSG_DATA point inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(LaunchError::EgressSend(std::io::Error::other(
                "no room for the control message",
            )));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            data_len as usize,
        );
        if libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(LaunchError::EgressSend(last()));
        }
    }
    Ok(())
}
