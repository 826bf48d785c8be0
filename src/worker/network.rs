//! A sandboxed worker's network (`--network`): in `agent` mode (the default) its whole process
//! tree reaches only its agent's API hosts and the `allow:` hosts, through a filtering proxy
//! the runner runs for it outside the sandbox on 127.0.0.1 ([`Proxy`]), while the kernel lets
//! it connect by TCP to that proxy's port only (Landlock, ABI 4); `off`: no TCP connection at
//! all; `open`: no rule. The proxy is the worker's own (one per worker, for as long as it
//! runs): what it refuses is that worker's ([`NetRefusals`]).
//!
//! The proxy speaks `CONNECT host:port` (HTTPS, and any TCP a client tunnels) and plain HTTP
//! requests with an absolute URI (`GET http://host/path`), to allowed hosts only; every other
//! request gets `403` and is counted. It forces `Connection: close` on plain HTTP so that one
//! client connection carries requests to one host only.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `--network`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Its agent's API hosts and these (`allow:HOST,…`), through the proxy.
    Agent { allow: Vec<Host> },
    /// No TCP connection at all.
    Off,
    /// No rule: wherever its user may connect.
    Open,
}

impl Default for Network {
    fn default() -> Network {
        Network::Agent { allow: Vec::new() }
    }
}

impl std::str::FromStr for Network {
    type Err = String;
    /// `agent`, `off`, `open`, or `allow:HOST[:PORT],…` (agent mode with these hosts too).
    fn from_str(s: &str) -> Result<Network, String> {
        match s.trim() {
            "agent" => Ok(Network::default()),
            "off" => Ok(Network::Off),
            "open" => Ok(Network::Open),
            other => match other.strip_prefix("allow:") {
                Some(list) => Ok(Network::Agent {
                    allow: list
                        .split(',')
                        .filter(|h| !h.trim().is_empty())
                        .map(str::parse)
                        .collect::<Result<_, _>>()?,
                }),
                None => Err(format!(
                    "`{other}` is not a network mode: agent, off, open or allow:HOST,…"
                )),
            },
        }
    }
}

/// What one sandboxed worker may reach, its agent's hosts resolved ([`Network`] for it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reach {
    /// No rule.
    #[default]
    Open,
    /// No TCP connection.
    Off,
    /// These hosts, through its own proxy.
    Hosts(Vec<Host>),
}

/// A host a worker may reach: a name or address, on one port or (none given) on 443 and 80.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub port: Option<u16>,
}

impl std::str::FromStr for Host {
    type Err = String;
    fn from_str(s: &str) -> Result<Host, String> {
        let s = s.trim().to_ascii_lowercase();
        let (name, port) = match s.rsplit_once(':') {
            Some((n, p)) if !n.contains(':') || n.ends_with(']') => (
                n.to_string(),
                Some(
                    p.parse::<u16>()
                        .map_err(|_| format!("`{s}`: the port is not a number"))?,
                ),
            ),
            _ => (s.clone(), None),
        };
        let name = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if name.is_empty() || name.contains(['/', ' ', '@']) {
            return Err(format!("`{s}` is not a host name"));
        }
        Ok(Host { name, port })
    }
}

/// What a worker of `agent` reaches under `network`: its agent's API hosts (and the host of
/// its base-URL variable, read by `var`) and the `allow:` hosts.
pub fn reach(
    network: &Network,
    agent: crate::backend::Agent,
    var: &dyn Fn(&str) -> Option<String>,
) -> Reach {
    match network {
        Network::Open => Reach::Open,
        Network::Off => Reach::Off,
        Network::Agent { allow } => {
            let mut hosts: Vec<Host> = agent
                .api_hosts()
                .iter()
                .filter_map(|h| h.parse().ok())
                .collect();
            hosts.extend(
                agent
                    .base_url_var()
                    .and_then(var)
                    .and_then(|u| Host::of_url(&u)),
            );
            hosts.extend(allow.iter().cloned());
            Reach::Hosts(hosts)
        }
    }
}

/// The run's sandbox line's part about the network, on a kernel that can (`tcp`) or cannot
/// limit TCP connections.
pub fn describe(network: &Network, tcp: bool) -> String {
    let what = match network {
        Network::Open => return "network: open (workers connect wherever you may)".into(),
        Network::Off => "network: off (no TCP connection".to_string(),
        Network::Agent { allow } if allow.is_empty() => {
            "network: agent (only the agent's API hosts, through a proxy on 127.0.0.1".to_string()
        }
        Network::Agent { allow } => {
            let names: Vec<String> = allow
                .iter()
                .map(|h| match h.port {
                    Some(p) => format!("{}:{p}", h.name),
                    None => h.name.clone(),
                })
                .collect();
            format!(
                "network: agent (only the agent's API hosts and {}, through a proxy on 127.0.0.1",
                names.join(", ")
            )
        }
    };
    if tcp {
        format!(
            "{what}; not blocked: UDP, Unix sockets bound to a path, the proxy's port on other addresses)"
        )
    } else {
        format!(
            "{what}; NOT enforced: this kernel cannot limit TCP connections, Landlock ABI 4, Linux 6.7)"
        )
    }
}

impl Host {
    /// The host of a base URL (`http://127.0.0.1:8080/v1`), on its port (the scheme's
    /// default when it names none).
    pub fn of_url(url: &str) -> Option<Host> {
        let (scheme, rest) = url.trim().split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit('@').next()?;
        let mut h: Host = authority.parse().ok()?;
        if h.port.is_none() {
            h.port = Some(if scheme.eq_ignore_ascii_case("http") {
                80
            } else {
                443
            });
        }
        Some(h)
    }

    fn allows(&self, name: &str, port: u16) -> bool {
        self.name == name
            && match self.port {
                Some(p) => p == port,
                None => port == 443 || port == 80,
            }
    }
}

/// The connections the proxy refused one worker: each `host:port` once, with how often.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRefusals {
    pub hosts: Vec<(String, u32)>,
}

/// The most hosts [`NetRefusals`] keeps (the count goes on).
const MAX_HOSTS: usize = 16;

impl NetRefusals {
    pub(crate) fn add(&mut self, host: String) {
        self.add_n(host, 1);
    }

    fn add_n(&mut self, host: String, n: u32) {
        if let Some(h) = self.hosts.iter_mut().find(|(h, _)| *h == host) {
            h.1 += n;
        } else if self.hosts.len() < MAX_HOSTS {
            self.hosts.push((host, n));
        }
    }

    /// These and `other`'s (a worker's and its check's), each host once.
    pub fn merged(&self, other: &NetRefusals) -> NetRefusals {
        let mut all = self.clone();
        for (h, n) in &other.hosts {
            all.add_n(h.clone(), *n);
        }
        all
    }

    /// How many connections were refused.
    pub fn count(&self) -> u32 {
        self.hosts.iter().map(|(_, n)| n).sum()
    }

    /// The warning for the attempt, when there were any.
    pub fn warning(&self, id: &str) -> Option<Refused> {
        self.warning_for(id, Whose::Worker)
    }

    /// The warning for a check of criterion `id`, when there were any.
    pub fn check_warning(&self, id: &str) -> Option<Refused> {
        self.warning_for(id, Whose::Check)
    }

    fn warning_for(&self, id: &str, whose: Whose) -> Option<Refused> {
        (!self.hosts.is_empty()).then(|| Refused {
            id: id.to_string(),
            whose,
            refusals: self.clone(),
        })
    }
}

/// Whose connections a [`Refused`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    Worker,
    Check,
}

/// The warning that the network policy refused connections of criterion `id`'s worker or
/// check. Its text is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub id: String,
    pub whose: Whose,
    pub refusals: NetRefusals,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let whose = match self.whose {
            Whose::Worker => "worker",
            Whose::Check => "check",
        };
        let list: Vec<String> = self
            .refusals
            .hosts
            .iter()
            .map(|(h, n)| format!("{h} ({n})"))
            .collect();
        write!(
            f,
            "the network policy refused {}'s {whose} {} connection(s): {}",
            self.id,
            self.refusals.count(),
            list.join(", ")
        )
    }
}

/// A worker's proxy, listening on 127.0.0.1 until dropped.
pub struct Proxy {
    pub port: u16,
    refused: Arc<Mutex<NetRefusals>>,
    task: tokio::task::JoinHandle<()>,
}

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;

impl Proxy {
    /// Listens on a free port of 127.0.0.1 for a worker that may reach `allowed` (in a tokio
    /// runtime).
    pub fn start(allowed: Vec<Host>) -> std::io::Result<Proxy> {
        let std = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std.set_nonblocking(true)?;
        let listener = TcpListener::from_std(std)?;
        let port = listener.local_addr()?.port();
        let refused = Arc::new(Mutex::new(NetRefusals::default()));
        let allowed = Arc::new(allowed);
        let task = tokio::spawn({
            let refused = Arc::clone(&refused);
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let (allowed, refused) = (Arc::clone(&allowed), Arc::clone(&refused));
                    tokio::spawn(async move {
                        let _ = serve(client, &allowed, &refused).await;
                    });
                }
            }
        });
        Ok(Proxy {
            port,
            refused,
            task,
        })
    }

    /// The environment that sends a worker's HTTP clients through the proxy (upper and lower
    /// case; `NO_PROXY` empty: 127.0.0.1 goes through it too).
    pub fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        let mut v = Vec::new();
        for k in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
            v.push((k.to_string(), url.clone()));
            v.push((k.to_ascii_lowercase(), url.clone()));
        }
        v.push(("NO_PROXY".into(), String::new()));
        v.push(("no_proxy".into(), String::new()));
        v
    }

    /// Stops listening; what it refused.
    pub fn stop(self) -> NetRefusals {
        self.task.abort();
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One client connection: its request head, then a tunnel or one forwarded request.
async fn serve(
    mut client: TcpStream,
    allowed: &[Host],
    refused: &Mutex<NetRefusals>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = client.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_HEAD {
            return reply(&mut client, "431 Request Header Fields Too Large").await;
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let rest = &head[end..];
    let mut first = text.lines().next().unwrap_or("").split(' ');
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let (name, port, path) = if method.eq_ignore_ascii_case("CONNECT") {
        match target.parse::<Host>() {
            Ok(Host {
                name,
                port: Some(p),
            }) => (name, p, None),
            _ => return reply(&mut client, "400 Bad Request").await,
        }
    } else {
        match Host::of_url(target) {
            Some(h) if target.to_ascii_lowercase().starts_with("http://") => {
                let after = &target["http://".len()..];
                let path = after.find('/').map_or("/", |i| &after[i..]).to_string();
                (h.name, h.port.unwrap_or(80), Some(path))
            }
            _ => return reply(&mut client, "400 Bad Request").await,
        }
    };
    if !allowed.iter().any(|h| h.allows(&name, port)) {
        if let Ok(mut r) = refused.lock() {
            r.add(format!("{name}:{port}"));
        }
        return reply(&mut client, "403 Forbidden").await;
    }
    let Ok(mut upstream) = TcpStream::connect((name.as_str(), port)).await else {
        return reply(&mut client, "502 Bad Gateway").await;
    };
    match path {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?
        }
        Some(path) => {
            let mut out = format!("{method} {path} HTTP/1.1\r\n");
            for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
                let key = line.split(':').next().unwrap_or("").to_ascii_lowercase();
                if !matches!(
                    key.as_str(),
                    "connection" | "proxy-connection" | "proxy-authorization" | "keep-alive"
                ) {
                    out.push_str(line);
                    out.push_str("\r\n");
                }
            }
            out.push_str("Connection: close\r\n\r\n");
            upstream.write_all(out.as_bytes()).await?;
        }
    }
    upstream.write_all(rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

async fn reply(client: &mut TcpStream, status: &str) -> std::io::Result<()> {
    let body = format!("prdloop's network policy: {status}\n");
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(msg.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sandbox line and `doctor` say what the network rules leave open: UDP, Unix sockets
    /// bound to a path, and the proxy's port on any address.
    #[test]
    fn what_the_network_rules_leave_open_is_said() {
        let line = describe(&Network::default(), true);
        for open in [
            "UDP",
            "Unix sockets bound to a path",
            "the proxy's port on other addresses",
        ] {
            assert!(line.contains(open), "{open}: {line}");
        }
        let doctor = crate::worker::sandbox::Support::Landlock { abi: 6 }.net_walls();
        for open in [
            "UDP",
            "Unix sockets bound to a path",
            "by port on any address",
            "127.0.0.2",
        ] {
            assert!(doctor.contains(open), "{open}: {doctor}");
        }
    }

    #[test]
    fn modes_and_hosts_parse() {
        assert_eq!("agent".parse(), Ok(Network::default()));
        assert_eq!("off".parse(), Ok(Network::Off));
        assert_eq!("open".parse(), Ok(Network::Open));
        let Ok(Network::Agent { allow }) = "allow:pypi.org,127.0.0.1:8080".parse() else {
            panic!("allow: did not parse");
        };
        assert!(allow[0].allows("pypi.org", 443) && !allow[0].allows("pypi.org", 22));
        assert!(allow[1].allows("127.0.0.1", 8080) && !allow[1].allows("127.0.0.1", 80));
        assert!(
            "wide"
                .parse::<Network>()
                .unwrap_err()
                .contains("agent, off, open")
        );
        assert!("allow:a.com:x".parse::<Network>().is_err());
        let h = Host::of_url("http://127.0.0.1:4321/v1").unwrap();
        assert_eq!((h.name.as_str(), h.port), ("127.0.0.1", Some(4321)));
        assert_eq!(
            Host::of_url("https://api.example.com").unwrap().port,
            Some(443)
        );
        assert_eq!(Host::of_url("api.example.com"), None);
    }

    /// The proxy tunnels to an allowed host and forwards its plain requests; another host, or
    /// another port of an allowed one, gets 403 and is counted.
    #[tokio::test]
    async fn the_proxy_lets_through_allowed_hosts_only_and_counts_the_rest() {
        let server = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = server.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = server.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    let n = s.read(&mut b).await.unwrap_or(0);
                    let first = String::from_utf8_lossy(&b[..n])
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string();
                    let _ = s
                        .write_all(format!("HTTP/1.1 200 OK\r\n\r\n{first}").as_bytes())
                        .await;
                });
            }
        });
        let proxy = Proxy::start(vec![format!("127.0.0.1:{port}").parse().unwrap()]).unwrap();
        let p = proxy.port;
        let ask = move |req: String| async move {
            let mut c = TcpStream::connect(("127.0.0.1", p)).await.unwrap();
            c.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            let _ = c.read_to_string(&mut out).await;
            out
        };
        let got = ask(format!(
            "GET http://127.0.0.1:{port}/x?y HTTP/1.1\r\nHost: a\r\n\r\n"
        ))
        .await;
        assert!(got.ends_with("GET /x?y HTTP/1.1"), "{got}");
        let got = ask(format!(
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nPING / HTTP/1.1\r\n"
        ))
        .await;
        assert!(
            got.starts_with("HTTP/1.1 200 Connection Established"),
            "{got}"
        );
        assert!(got.ends_with("PING / HTTP/1.1"), "{got}");
        for target in [
            "CONNECT evil.example:443",
            "CONNECT 127.0.0.1:9",
            "GET http://127.0.0.1:9/",
        ] {
            let got = ask(format!("{target} HTTP/1.1\r\n\r\n")).await;
            assert!(got.starts_with("HTTP/1.1 403"), "{target}: {got}");
        }
        let r = proxy.stop();
        assert_eq!(
            r.hosts,
            vec![
                ("evil.example:443".to_string(), 1),
                ("127.0.0.1:9".to_string(), 2)
            ]
        );
        assert!(
            r.warning("ISC-A-1")
                .unwrap()
                .to_string()
                .contains("3 connection(s)")
        );
    }
}
