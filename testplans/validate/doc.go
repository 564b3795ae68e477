// Package validate checks p2pmsg's Testground plans with Testground's own
// code: every manifest.toml and composition is parsed with the types of
// github.com/testground/testground v0.6.0 (pkg/api) and prepared and
// validated for every builder and runner the manifest declares.
//
// It is a module of its own because testground v0.6.0 requires sdk-go
// v0.3.1-0.20220525111316-b6b10897b578: in the plans' module, minimal
// version selection would lift the plans off the sdk-go v0.3.0 they pin.
// Testground's builder and runner packages (pkg/build, pkg/runner), whose
// configuration types say which keys a manifest's [builders.X] and
// [runners.X] tables may hold, pull in Docker's and Kubernetes' clients
// (a cold race-enabled build took 6m23s against 1m49s for pkg/api alone on
// the 2-core CI machine), so those types are read from Testground's source
// in the module cache with go/parser instead of being compiled.
package validate
