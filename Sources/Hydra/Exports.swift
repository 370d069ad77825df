// The embeddable engine: one import gives the job model, events and managers.
@_exported import HydraCore
@_exported import HydraLocal
@_exported import HydraREST
@_exported import HydraResources
// The HTTP values the embedding hooks (`engine.rest.addRequestPreparer` and
// friends) hand over, so that `import Hydra` is enough to write one.
@_exported import struct HydraHTTP.HTTPHeader
@_exported import struct HydraHTTP.HTTPHeaderBlock
@_exported import struct HydraHTTP.HTTPRequest
@_exported import struct HydraHTTP.HTTPResponse
