package pb

import _ "embed"

// OpenAPI is the Swagger 2.0 document of the HTTP/JSON routes
// (barista.http.yaml), as protoc-gen-openapiv2 writes it (make proto).
//
//go:embed barista.swagger.json
var OpenAPI []byte
