// Swagger UI on this gateway's own document. Nothing is fetched from anywhere else: no validator
// badge (it would send the document to validator.swagger.io), no remote presets or fonts.
"use strict";
(function () {
  if (typeof window.SwaggerUIBundle !== "function") {
    document.getElementById("docs-missing").hidden = false;
    return;
  }
  window.ui = window.SwaggerUIBundle({
    url: new URL("openapi.json", document.baseURI).href,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
  });
})();
