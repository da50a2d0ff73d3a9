//! SSRF guard: tool URLs (registered or executed) must not reach loopback, link-local, private,
//! shared (CGNAT), unspecified, multicast or broadcast addresses unless an operator allow-lists
//! them (`exec.allow_private`, e.g. `127.0.0.1/32` for the replay sandbox).
//!
//! Checked twice: before a call (IP literals and names resolved once, so a refusal is a clear,
//! non-retried error) and inside the HTTP client's resolver, so a name that re-resolves to a
//! private address between the check and the connection (DNS rebinding) is still refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// An allow-listed network — an address and a prefix length — or one socket (address and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    prefix: u8,
    /// Only this port (a socket entry: `127.0.0.1:8765`, `[::1]:8765`).
    port: Option<u16>,
}

impl Cidr {
    /// `10.0.0.0/8`, `127.0.0.1` (a single address), `fd00::/8`, or one socket: `127.0.0.1:8765`,
    /// `[::1]:8765` (that address on that port only: what a URL rewrite to the sandbox admits).
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        if let Ok(sock) = s.trim().parse::<SocketAddr>() {
            let prefix = if sock.is_ipv4() { 32 } else { 128 };
            return Ok(Cidr { addr: sock.ip(), prefix, port: Some(sock.port()) });
        }
        let (a, p) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| format!("`{s}` is not an IP address or CIDR network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => {
                p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| format!("`{s}`: prefix must be 0..={max}"))?
            }
            None => max,
        };
        Ok(Cidr { addr, prefix, port: None })
    }

    /// Whether it admits `ip` on `port` (`None`: the port is not known here — the HTTP client's
    /// resolver — and was checked with the URL before).
    pub(crate) fn admits(&self, ip: IpAddr, port: Option<u16>) -> bool {
        self.contains(ip) && (self.port.is_none() || port.is_none() || self.port == port)
    }

    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => mask_eq(&net.octets(), &ip.octets(), self.prefix),
            (IpAddr::V6(net), IpAddr::V6(ip)) => mask_eq(&net.octets(), &ip.octets(), self.prefix),
            _ => false,
        }
    }
}

fn mask_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = (prefix / 8) as usize;
    if a[..full] != b[..full] {
        return false;
    }
    let rest = prefix % 8;
    rest == 0 || (a[full] ^ b[full]) & (0xffu8 << (8 - rest)) == 0
}

/// IPv4-mapped IPv6 addresses are checked as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Why `ip` is not a public address, if it is not.
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_unspecified() || o[0] == 0 {
        Some("unspecified")
    } else if ip.is_broadcast() || ip.is_multicast() || o[0] >= 240 {
        Some("broadcast/multicast/reserved")
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        Some("shared (CGNAT)")
    } else if matches!(o[..3], [192, 0, 2] | [198, 51, 100] | [203, 0, 113]) {
        // TEST-NET-1..3 (RFC 5737): for examples in documents, never a real host.
        Some("documentation")
    } else if o[0] == 198 && (o[1] == 18 || o[1] == 19) {
        // RFC 2544: benchmarking networks between devices, not the Internet.
        Some("benchmarking")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address carries by a translation or tunnelling convention, and which:
/// IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96` (RFC 6052) and its local-use `64:ff9b:1::/48`
/// (RFC 8215; the address in its last 32 bits, as local translators put it), 6to4 `2002:AABB:CCDD::/48`,
/// and Teredo `2001::/32` (the server in bits 32..64, the client obfuscated in the last 32).
fn embedded_v4(ip: Ipv6Addr) -> Vec<(Ipv4Addr, &'static str)> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        vec![(low, "IPv4-compatible")]
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) {
        vec![(low, "NAT64")]
    } else if s[0] == 0x2002 {
        vec![(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8), "6to4")]
    } else if s[0] == 0x2001 && s[1] == 0 {
        let server = Ipv4Addr::new((s[2] >> 8) as u8, s[2] as u8, (s[3] >> 8) as u8, s[3] as u8);
        let client = Ipv4Addr::from(!u32::from(low));
        vec![(server, "Teredo server"), (client, "Teredo client")]
    } else {
        Vec::new()
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if embedded_v4(ip).iter().any(|(v4, _)| v4_kind(*v4).is_some()) {
        Some("non-public IPv4 address embedded in an IPv6")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if s[0] == 0x2001 && s[1] == 0xdb8 {
        Some("documentation")
    } else if s[..4] == [0x100, 0, 0, 0] {
        Some("discard-only")
    } else {
        None
    }
}

/// The policy: which non-public addresses may be reached anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    allow: Vec<Cidr>,
}

impl Guard {
    pub fn new(allow: &[String]) -> Result<Self, String> {
        Ok(Guard { allow: allow.iter().map(|s| Cidr::parse(s)).collect::<Result<_, _>>()? })
    }

    /// `Err(reason)` when `ip` may not be reached (on some port: see [`Guard::check_addr`]).
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        self.check_addr(ip, None)
    }

    /// `Err(reason)` when `ip` may not be reached on `port`.
    pub fn check_addr(&self, ip: IpAddr, port: Option<u16>) -> Result<(), String> {
        match non_public(ip) {
            Some(kind) if !self.allow.iter().any(|c| c.admits(ip, port)) => match port {
                Some(p) if self.allow.iter().any(|c| c.contains(ip)) => {
                    Err(format!("{ip} is a {kind} address, allow-listed on other ports than {p}"))
                }
                _ => Err(format!("{ip} is a {kind} address (allow-list it in exec.allow_private to call it)")),
            },
            _ => Ok(()),
        }
    }

    /// Check a URL's host: an IP literal directly, a name by resolving it (every address must pass).
    pub async fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        let host = url.host_str().ok_or_else(|| format!("URL `{}` has no host", redact(url)))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port_or_known_default().unwrap_or(80);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.check_addr(ip, Some(port));
        }
        let addrs: Vec<SocketAddr> =
            tokio::net::lookup_host((bare, port)).await.map_err(|e| format!("cannot resolve {bare}: {e}"))?.collect();
        if addrs.is_empty() {
            return Err(format!("{bare} resolves to no address"));
        }
        for a in addrs {
            self.check_addr(a.ip(), Some(port)).map_err(|e| format!("{bare} resolves to {e}"))?;
        }
        Ok(())
    }
}

/// A URL without its query string (query strings may hold keys).
pub(crate) fn redact(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_password(None).ok();
    u.to_string()
}

/// The HTTP client's resolver: answers only with addresses the guard allows.
pub(crate) struct GuardedResolver(pub Arc<Guard>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addrs.iter().copied().filter(|a| guard.check_ip(a.ip()).is_ok()).collect();
            if allowed.is_empty() {
                let why = addrs
                    .first()
                    .map(|a| guard.check_ip(a.ip()).err().unwrap_or_default())
                    .unwrap_or_else(|| "no address".into());
                return Err(format!("refused: {host} resolves to {why}").into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_ranges_are_refused_unless_allow_listed() {
        let g = Guard::new(&[]).unwrap();
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "255.255.255.255",
        ] {
            assert!(g.check_ip(ip.parse().unwrap()).is_err(), "{ip} must be refused");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1", "100.128.0.1"] {
            assert!(g.check_ip(ip.parse().unwrap()).is_ok(), "{ip} is public");
        }
        let g = Guard::new(&["127.0.0.1/32".into(), "10.0.0.0/8".into()]).unwrap();
        assert!(g.check_ip("127.0.0.1".parse().unwrap()).is_ok());
        assert!(g.check_ip("::ffff:127.0.0.1".parse().unwrap()).is_ok());
        assert!(g.check_ip("127.0.0.2".parse().unwrap()).is_err());
        assert!(g.check_ip("10.200.0.9".parse().unwrap()).is_ok());
        assert!(g.check_ip("169.254.169.254".parse().unwrap()).unwrap_err().contains("link-local"));
        // The documentation ranges (RFC 5737) and benchmarking networks are never real hosts; their
        // neighbours are public.
        for ip in ["192.0.2.10", "198.51.100.7", "203.0.113.200", "198.18.0.1", "198.19.255.254"] {
            let e = g.check_ip(ip.parse().unwrap()).unwrap_err();
            assert!(e.contains("documentation") || e.contains("benchmarking"), "{ip}: {e}");
        }
        for ip in ["192.0.3.1", "198.51.101.1", "203.0.114.1", "198.20.0.1"] {
            assert!(g.check_ip(ip.parse().unwrap()).is_ok(), "{ip} is public");
        }
        assert!(Guard::new(&["10.0.0.0/33".into()]).is_err());
        assert!(Guard::new(&["localhost".into()]).is_err());
    }

    #[test]
    fn ipv6_forms_that_carry_a_private_ipv4_are_refused_and_no_ipv4_allow_entry_admits_them() {
        let g = Guard::new(&[]).unwrap();
        // NAT64 of 169.254.169.254, 6to4 of 127.0.0.1, IPv4-compatible 127.0.0.1 and 10.0.0.1,
        // local-use NAT64, Teredo with a loopback server, Teredo with a private client (10.0.0.1
        // obfuscated: !0x0a000001), documentation and discard-only ranges.
        for ip in [
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b:1::7f00:1",
            "2001:0:7f00:1::1",
            "2001:0:808:808::f5ff:fffe",
            "2001:db8::1",
            "100::1",
        ] {
            let e = g.check_ip(ip.parse().unwrap());
            assert!(e.is_err(), "{ip} must be refused");
        }
        // The same forms carrying public addresses, and ordinary public IPv6, pass.
        for ip in [
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:0:808:808::f7f7:f7f7",
            "2606:4700::1111",
            "2a00:1450:4001:82a::200e",
        ] {
            assert!(g.check_ip(ip.parse().unwrap()).is_ok(), "{ip} is public");
        }
        // Allow-listing 127.0.0.1 (the replay sandbox) admits it and its mapped form, not a
        // translated or tunnelled form of it.
        let g = Guard::new(&["127.0.0.1/32".into()]).unwrap();
        assert!(g.check_ip("::ffff:127.0.0.1".parse().unwrap()).is_ok());
        for ip in ["::127.0.0.1", "2002:7f00:1::", "64:ff9b::7f00:1"] {
            assert!(g.check_ip(ip.parse().unwrap()).is_err(), "{ip} must stay refused");
        }
    }

    #[tokio::test]
    async fn a_socket_entry_admits_its_port_only_whatever_the_address_is_spelled() {
        let g = Guard::new(&["127.0.0.1:8765".into()]).unwrap();
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(g.check_url(&url("http://127.0.0.1:8765/x")).await.is_ok());
        for u in [
            "http://127.0.0.1:8080/v1/users",
            "http://2130706433:8080/",
            "http://0x7f000001:8080/",
            "http://0177.0.0.1:8080/",
            "http://127.1:8080/",
            "http://[::ffff:127.0.0.1]:8080/",
            "http://localhost:8080/",
            "http://127.0.0.2:8765/",
            "http://127.0.0.1/",
        ] {
            assert!(g.check_url(&url(u)).await.is_err(), "{u} must be refused");
        }
        assert!(g.check_url(&url("http://2130706433:8765/")).await.is_ok(), "the same socket, spelled otherwise");
        assert_eq!(
            Cidr::parse("[::1]:8765").unwrap(),
            Cidr { addr: "::1".parse().unwrap(), prefix: 128, port: Some(8765) }
        );
    }

    #[tokio::test]
    async fn names_are_checked_by_what_they_resolve_to() {
        let g = Guard::new(&[]).unwrap();
        let e = g.check_url(&reqwest::Url::parse("http://localhost:9/x?key=secret").unwrap()).await.unwrap_err();
        assert!(e.contains("localhost resolves to") && e.contains("loopback"), "{e}");
        assert!(!e.contains("secret"));
        assert!(g.check_url(&reqwest::Url::parse("http://[::1]:9/").unwrap()).await.is_err());
    }
}
