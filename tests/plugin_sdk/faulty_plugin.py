"""A Python plugin that misbehaves on demand: the FAULT environment variable, read at every call
(so a test can switch a fault on and off inside one process), names what goes wrong.

  <where>               RuntimeError("boom in <where>") in that entry point's plugin code
                        (create, applicable, details, workspace, build, plan_ws, execute,
                        all_ids, close)
  <where>:plugin_error  PluginError(5 = NOT_APPLICABLE, "declined in <where>")
  bad_ids               GetAllEngineIds returns a non-integer id
  all_ids:grow          GetAllEngineIds reports a different count on the second (fill) call
  applicable:dup        GetApplicableEngineIds reports the one engine twice (count 2 > max 1)
  applicable:unknown    GetApplicableEngineIds reports an engine id the plugin never declared
  missing_buffer        the plan reads a tensor uid (42) that is not in the variant pack
  leak                  every plan built keeps LEAK_BYTES alive in a module-level list

With no fault the one engine (FAULTY_ENGINE) applies to any graph, needs 64 bytes of workspace
and writes 7.0 into every element of tensor 3 (a float32 tensor of the graph).
"""
import os

import numpy as np

from hipdnn_cabi.plugin_sdk import (EngineBase, EnginePluginBase, EnginePluginContainer, PlanBase,
                                    PlanBuilderBase, PluginError, engine_id_of)

LEAK_BYTES = 1 << 20
LEAKED = []          # what the "leak" fault never frees
CONTAINERS = []      # every container ever created (the host-sharing test counts them)
CLOSED = []          # containers closed


def fault():
    return os.environ.get("FAULT", "")


def maybe(where):
    f = fault()
    if f == where:
        raise RuntimeError(f"boom in {where}")
    if f == where + ":plugin_error":
        raise PluginError(5, f"declined in {where}")


class Plan(PlanBase):
    def __init__(self, graph):
        self.out = graph.tensors.get(3)

    def get_workspace_size(self, handle):
        maybe("plan_ws")
        return 64

    def execute(self, handle, buffers, workspace):
        maybe("execute")
        if fault() == "missing_buffer":
            buffers[42]
        if self.out is not None:
            buffers.view(self.out, np.float32)[...] = 7.0


class Builder(PlanBuilderBase):
    def is_applicable(self, handle, graph):
        maybe("applicable")
        return True

    def get_max_workspace_size(self, handle, graph, config):
        maybe("workspace")
        return 64

    def build_plan(self, handle, graph, config):
        maybe("build")
        if fault() == "leak":
            LEAKED.append(bytearray(LEAK_BYTES))
        return Plan(graph)


class Eng(EngineBase):
    name = "FAULTY_ENGINE"
    plan_builder = Builder()

    def get_details(self, handle, graph):
        maybe("details")
        return super().get_details(handle, graph)


class Container(EnginePluginContainer):
    def __init__(self, plugin):
        super().__init__(plugin)
        CONTAINERS.append(self)

    def get_applicable_engine_ids(self, graph, handle=None):
        ids = super().get_applicable_engine_ids(graph, handle)
        if fault() == "applicable:dup":
            return ids + ids
        if fault() == "applicable:unknown":
            return [engine_id_of("NEVER_DECLARED_ENGINE")]
        return ids

    def close(self):
        CLOSED.append(self)
        maybe("close")


class Faulty(EnginePluginBase):
    name = "faulty"
    engines = [Eng]
    container_class = Container

    def __init__(self):
        super().__init__()
        self._all_calls = 0

    def get_all_engine_ids(self):
        maybe("all_ids")
        if fault() == "bad_ids":
            return ["not an id"]
        ids = super().get_all_engine_ids()
        self._all_calls += 1
        if fault() == "all_ids:grow" and self._all_calls % 2 == 0:
            return ids + [engine_id_of("EXTRA_ENGINE")]
        return ids

    def create_container(self):
        maybe("create")
        return super().create_container()


hipdnn_plugin = Faulty
