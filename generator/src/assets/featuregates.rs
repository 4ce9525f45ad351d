//! The FeatureGate status a release's cluster-config-api render writes (`status.featureGates[]`:
//! one entry whose `version` is the release's, with the enabled and disabled gates of the feature
//! set). The machine-config-controller and the kube-apiserver and kube-controller-manager
//! operators refuse a FeatureGate without the entry for their release.
//!
//! The gates are data of each release: these are OpenShift 4.18's for the Default feature set of a
//! self-managed highly-available cluster (openshift/api release-4.18,
//! payload-manifests/featuregates/featureGate-SelfManagedHA-Default.yaml, as of late 2025: earlier
//! 4.18 z-streams had the two StreamingCollectionEncoding gates disabled). Another release, or
//! another feature set, needs that release's own render (`hardshift render`, see the issues).

use serde_json::{json, Value};

const ENABLED_4_18: &[&str] = &[
    "AWSEFSDriverVolumeMetrics",
    "AdminNetworkPolicy",
    "AlibabaPlatform",
    "AzureWorkloadIdentity",
    "BareMetalLoadBalancer",
    "BuildCSIVolumes",
    "ChunkSizeMiB",
    "CloudDualStackNodeIPs",
    "DisableKubeletCloudCredentialProviders",
    "GCPLabelsTags",
    "HardwareSpeed",
    "IngressControllerLBSubnetsAWS",
    "KMSv1",
    "ManagedBootImages",
    "ManagedBootImagesAWS",
    "MultiArchInstallAWS",
    "MultiArchInstallGCP",
    "NetworkDiagnosticsConfig",
    "NetworkLiveMigration",
    "NetworkSegmentation",
    "NewOLM",
    "NodeDisruptionPolicy",
    "OnClusterBuild",
    "PersistentIPsForVirtualization",
    "PrivateHostedZoneAWS",
    "SetEIPForNLBIngressController",
    "StreamingCollectionEncodingToJSON",
    "StreamingCollectionEncodingToProtobuf",
    "VSphereControlPlaneMachineSet",
    "VSphereDriverConfiguration",
    "VSphereMultiVCenters",
    "VSphereStaticIPs",
    "ValidatingAdmissionPolicy",
];

const DISABLED_4_18: &[&str] = &[
    "AWSClusterHostedDNS",
    "AdditionalRoutingCapabilities",
    "AutomatedEtcdBackup",
    "BootcNodeManagement",
    "CSIDriverSharedResource",
    "ClusterAPIInstall",
    "ClusterAPIInstallIBMCloud",
    "ClusterMonitoringConfig",
    "ConsolePluginContentSecurityPolicy",
    "DNSNameResolver",
    "DynamicResourceAllocation",
    "EtcdBackendQuota",
    "EventedPLEG",
    "Example",
    "ExternalOIDC",
    "ExternalOIDCWithUIDAndExtraClaimMappings",
    "GCPClusterHostedDNS",
    "GatewayAPI",
    "ImageStreamImportMode",
    "IngressControllerDynamicConfigurationManager",
    "InsightsConfig",
    "InsightsConfigAPI",
    "InsightsOnDemandDataGather",
    "InsightsRuntimeExtractor",
    "MachineAPIMigration",
    "MachineAPIOperatorDisableMachineHealthCheckController",
    "MachineAPIProviderOpenStack",
    "MachineConfigNodes",
    "MaxUnavailableStatefulSet",
    "MetricsCollectionProfiles",
    "MinimumKubeletVersion",
    "MixedCPUsAllocation",
    "MultiArchInstallAzure",
    "NodeSwap",
    "NutanixMultiSubnets",
    "OVNObservability",
    "OpenShiftPodSecurityAdmission",
    "PinnedImages",
    "PlatformOperators",
    "ProcMountType",
    "RouteAdvertisements",
    "RouteExternalCertificate",
    "ServiceAccountTokenNodeBinding",
    "SignatureStores",
    "SigstoreImageVerification",
    "TranslateStreamCloseWebsocketRequests",
    "UpgradeStatus",
    "UserNamespacesPodSecurityStandards",
    "UserNamespacesSupport",
    "VSphereMultiNetworks",
    "VolumeAttributesClass",
    "VolumeGroupSnapshot",
];

/// (enabled, disabled) for a release version's Default feature set, when this build knows it.
pub fn gates(version: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("4"), Some("18")) => Some((ENABLED_4_18, DISABLED_4_18)),
        _ => None,
    }
}

/// The FeatureGate's status for `version`, or None when the gates of that release are unknown.
pub fn status(version: &str) -> Option<Value> {
    let (enabled, disabled) = gates(version)?;
    let names = |l: &[&str]| l.iter().map(|n| json!({"name": n})).collect::<Vec<_>>();
    Some(json!({"featureGates": [{"version": version, "enabled": names(enabled), "disabled": names(disabled)}]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_are_the_targeted_releases() {
        // `--version` names TARGET_OPENSHIFT: the gates written must be that release's.
        assert!(gates(&format!("{}.0", crate::release::TARGET_OPENSHIFT)).is_some());
    }

    #[test]
    fn sorted_disjoint_and_counted() {
        let (e, d) = gates("4.18.0").unwrap();
        assert_eq!((e.len(), d.len()), (33, 52));
        for l in [e, d] {
            assert!(l.windows(2).all(|w| w[0] < w[1]), "byte order, as the render sorts");
        }
        assert!(e.iter().all(|g| !d.contains(g)));
        assert!(gates("4.17.3").is_none() && gates("4.180.0").is_none() && gates("").is_none());
        let s = status("4.18.7").unwrap();
        assert_eq!(s["featureGates"][0]["version"], "4.18.7");
        assert_eq!(s["featureGates"][0]["enabled"][0]["name"], "AWSEFSDriverVolumeMetrics");
    }
}
