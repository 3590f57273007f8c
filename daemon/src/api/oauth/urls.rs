//! Which URLs the resource server fetches from: the issuer's metadata and its keys come only
//! over https, or over http on loopback. Below both the server's setup and the key set.

/// An `https` URL, or `http` on loopback (a test's, or a proxy's on the same host): keys
/// and metadata fetched in the clear from elsewhere could be anyone's.
pub(super) fn check_url(field: &str, value: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(value).map_err(|err| format!("{field}: {value}: {err}"))?;
    let loopback = url.host_str().is_some_and(|host| {
        host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "{field}: {value}: use https (http only on loopback)"
        )),
    }
}
