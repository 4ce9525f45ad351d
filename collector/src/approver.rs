//! The kubelets' CSR rules live in `hardshift-approver` (shared with the agent's post-reboot
//! step); the collector's view and `approve-csrs` reach them here.

pub use hardshift_approver::*;

#[cfg(test)]
pub(crate) mod tests {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    /// A PKCS#10 request in PEM, signed by a fresh key.
    pub(crate) fn request(cn: &str, orgs: &[&str], sans: Vec<SanType>) -> Vec<u8> {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        for o in orgs {
            dn.push(DnType::OrganizationName, *o);
        }
        dn.push(DnType::CommonName, cn);
        p.distinguished_name = dn;
        p.subject_alt_names = sans;
        let key = KeyPair::generate().unwrap();
        p.serialize_request(&key).unwrap().pem().unwrap().into_bytes()
    }
}
