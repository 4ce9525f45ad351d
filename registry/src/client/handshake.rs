//! The registry's auth handshake, as registries do it: a cached token or Basic first, else
//! anonymous; on 401, answer the challenge once (Basic, or a Bearer token from the realm).

use super::{said, transport, Client, Error};
use crate::auth::{challenge, Challenge};
use crate::reference::Reference;

impl Client {
    /// One request to `what` under the image's repository, with `auth` if any.
    fn request(&self, r: &Reference, method: reqwest::Method, what: &str, accept: &str, auth: Option<String>) -> reqwest::RequestBuilder {
        let mut b = self.http.request(method, Self::url(r, what)).header("Accept", accept);
        if let Some(a) = auth {
            b = b.header("Authorization", a);
        }
        b
    }

    /// The pull secret's Basic credentials for a registry, if it holds any.
    fn basic(&self, registry: &str) -> Option<String> {
        self.auths.get(registry).map(|(u, p)| {
            use base64::Engine;
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")))
        })
    }

    /// What to send first: a cached token, or Basic where the registry asked for it before.
    async fn first_auth(&self, r: &Reference, key: &(String, String)) -> Option<String> {
        match self.tokens.lock().await.get(key) {
            Some(t) => Some(format!("Bearer {t}")),
            None if self.basic.lock().await.contains(&r.registry) => self.basic(&r.registry),
            None => None,
        }
    }

    /// Answer a 401's challenge: Basic from the pull secret, or a bearer token (then cached).
    /// None when the registry asks for nothing this client can give.
    async fn answer(&self, r: &Reference, header: &str, key: (String, String)) -> Result<Option<String>, Error> {
        Ok(match challenge(header) {
            Some(Challenge::Basic) => {
                self.basic.lock().await.insert(r.registry.clone());
                self.basic(&r.registry)
            }
            Some(Challenge::Bearer {
                realm,
                service,
                scope: asked,
            }) => {
                let token = self
                    .token(r, &realm, service.as_deref(), asked.as_deref().unwrap_or(&key.1))
                    .await?;
                self.tokens.lock().await.insert(key, token.clone());
                Some(format!("Bearer {token}"))
            }
            None => None,
        })
    }

    /// The error for an answer refused with credentials, in the registry's own words.
    async fn refused(
        &self,
        r: &Reference,
        method: &reqwest::Method,
        what: &str,
        accept: &str,
        auth: String,
        resp: reqwest::Response,
    ) -> Error {
        let status = resp.status().as_u16();
        // A HEAD answer has no body: ask the same with GET for the registry's own words.
        let body = if *method == reqwest::Method::HEAD {
            match self.request(r, reqwest::Method::GET, what, accept, Some(auth)).send().await {
                Ok(g) => g.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        } else {
            resp.text().await.unwrap_or_default()
        };
        Error::Auth {
            image: r.to_string(),
            registry: r.registry.clone(),
            status,
            said: said(&body),
        }
    }

    /// One request with the registry's auth: a cached token or Basic first, else anonymous;
    /// on 401, answer the challenge once.
    pub(super) async fn send(&self, r: &Reference, method: reqwest::Method, what: &str, accept: &str) -> Result<reqwest::Response, Error> {
        let key = (r.registry.clone(), format!("repository:{}:pull", r.repository));
        let first = self.first_auth(r, &key).await;
        let resp = self
            .request(r, method.clone(), what, accept, first)
            .send()
            .await
            .map_err(|e| transport(&r.registry, &e))?;
        if resp.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let header = resp
            .headers()
            .get("www-authenticate")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        let Some(auth) = self.answer(r, &header, key).await? else {
            return Err(Error::Auth {
                image: r.to_string(),
                registry: r.registry.clone(),
                status: 401,
                said: format!(
                    "{} (no credentials for {} in the pull secret)",
                    said(&resp.text().await.unwrap_or_default()),
                    r.registry
                ),
            });
        };
        let resp = self
            .request(r, method.clone(), what, accept, Some(auth.clone()))
            .send()
            .await
            .map_err(|e| transport(&r.registry, &e))?;
        if matches!(resp.status().as_u16(), 401 | 403) {
            return Err(self.refused(r, &method, what, accept, auth, resp).await);
        }
        Ok(resp)
    }

    /// The bearer-token flow: GET realm?service=&scope= with the pull secret's Basic credentials.
    async fn token(&self, r: &Reference, realm: &str, service: Option<&str>, scope: &str) -> Result<String, Error> {
        if !realm.starts_with("https://") {
            return Err(Error::Other(format!(
                "{}: the registry sends its token realm {realm:?} over plain HTTP: the pull secret's credentials would go in the clear, so it is refused (the registry's token server must use HTTPS)",
                r.registry
            )));
        }
        let mut req = self.http.get(realm).query(&[("scope", scope)]);
        if let Some(s) = service {
            req = req.query(&[("service", s)]);
        }
        if let Some((u, p)) = self.auths.get(&r.registry) {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().await.map_err(|e| transport(&r.registry, &e))?;
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        if status != 200 {
            return Err(Error::Auth {
                image: r.to_string(),
                registry: r.registry.clone(),
                status,
                said: format!("token server {realm}: {}", said(&body)),
            });
        }
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["token"]
            .as_str()
            .or(v["access_token"].as_str())
            .map(String::from)
            .ok_or_else(|| Error::Other(format!("{}: the token server {realm} sent no token", r.registry)))
    }
}
