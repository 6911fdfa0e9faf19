"""The SDK's release: the version of barista it belongs to (one version
for the server, the command line and the SDKs; docs/releasing.md). The
package's metadata reads it from here (pyproject.toml)."""

__version__ = "0.9.0"
