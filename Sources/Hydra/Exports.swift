// The embeddable engine: one import gives the job model, events and managers.
@_exported import HydraCore
@_exported import HydraLocal
@_exported import HydraREST
@_exported import HydraResources
