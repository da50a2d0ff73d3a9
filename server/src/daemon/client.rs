//! Who a request comes from: the peer's address, or — behind a trusted reverse proxy
//! (`server.trusted_proxies`) — the client's, read from `X-Forwarded-For`.

use axum::http::HeaderMap;
use std::net::IpAddr;

/// The client's address: the peer's, unless the peer is a trusted proxy (`server.trusted_proxies`);
/// then the rightmost `X-Forwarded-For` address that is not itself a trusted proxy (a client can
/// prepend anything to that header, but not append past its own proxy).
pub(super) fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[String]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|t| t.trim().parse::<IpAddr>().is_ok_and(|p| p == *ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let hops: Vec<&str> =
        headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).collect();
    // From the right: the hops the trusted proxies appended, up to the first address that is
    // not a trusted proxy. Whatever stands left of it, the client wrote.
    for hop in hops.iter().rev().take(16) {
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) if is_trusted(&ip) => continue,
            Ok(ip) => return ip,
            Err(_) => break,
        }
    }
    peer
}

#[cfg(test)]
mod tests {
    use super::client_ip;
    use axum::http::HeaderMap;
    use std::net::IpAddr;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn xff(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", v.parse().unwrap());
        h
    }

    /// Behind a trusted proxy the client is the rightmost forwarded address that is not a proxy;
    /// from anyone else the header is ignored (a client cannot name itself another address).
    #[test]
    fn the_client_address_is_read_through_trusted_proxies_only() {
        let trusted = vec!["127.0.0.1".to_string(), "10.0.0.2".to_string()];
        let proxy = ip("127.0.0.1");
        assert_eq!(client_ip(proxy, &xff("203.0.113.5"), &trusted), ip("203.0.113.5"));
        // What the client prepended is not believed; the proxies' own hops are skipped.
        assert_eq!(client_ip(proxy, &xff("198.51.100.9, 203.0.113.5, 10.0.0.2"), &trusted), ip("203.0.113.5"));
        assert_eq!(client_ip(proxy, &xff("not-an-ip, 203.0.113.5"), &trusted), ip("203.0.113.5"));
        // Garbage where the proxy's hop should be, or no header: the proxy's own address.
        assert_eq!(client_ip(proxy, &xff("203.0.113.5, garbage"), &trusted), proxy);
        assert_eq!(client_ip(proxy, &HeaderMap::new(), &trusted), proxy);
        // Not from a trusted proxy: the header is ignored.
        assert_eq!(client_ip(ip("192.0.2.7"), &xff("203.0.113.5"), &trusted), ip("192.0.2.7"));
        assert_eq!(client_ip(proxy, &xff("203.0.113.5"), &[]), proxy);
    }
}
