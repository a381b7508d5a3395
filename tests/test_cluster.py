"""tf.train.ClusterSpec against TF 1.15's behaviour (expected values were produced with
TensorFlow's ClusterSpec), ClusterDef round trips and the FLOWRT_CONFIG reader."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt.cluster import ClusterSpec, cluster_from_environment
from flowrt.proto import cluster_pb2


@pytest.fixture
def sparse() -> ClusterSpec:
    return ClusterSpec({"worker": {3: "w3:1", 1: "w1:1"}, "ps": ["p0:1", "p1:1"],
                        "chief": []})


def test_exported_under_tf_train():
    assert tf.train.ClusterSpec is ClusterSpec
    assert tf.train.ClusterDef is cluster_pb2.ClusterDef
    assert tf.train.JobDef is cluster_pb2.JobDef


def test_dense_jobs():
    c = ClusterSpec({"worker": ["w0:2222", "w1:2222", "w2:2222"], "ps": ("p0:2222",)})
    assert c.jobs == ["worker", "ps"]
    assert c.num_tasks("worker") == 3 and c.num_tasks("ps") == 1
    assert c.task_indices("worker") == [0, 1, 2]
    assert c.task_address("worker", 2) == "w2:2222"
    assert c.job_tasks("worker") == ["w0:2222", "w1:2222", "w2:2222"]
    assert c.as_dict() == {"worker": ["w0:2222", "w1:2222", "w2:2222"], "ps": ["p0:2222"]}


def test_sparse_jobs_as_tf(sparse):
    assert repr(sparse) == ("ClusterSpec({'chief': {}, 'ps': ['p0:1', 'p1:1'], "
                            "'worker': {1: 'w1:1', 3: 'w3:1'}})")
    assert sparse.as_dict() == {"worker": {1: "w1:1", 3: "w3:1"},
                                "ps": ["p0:1", "p1:1"], "chief": {}}
    assert list(sparse.as_dict()) == ["worker", "ps", "chief"]
    assert sparse.jobs == ["worker", "ps", "chief"]
    assert sparse.job_tasks("worker") == [None, "w1:1", None, "w3:1"]
    assert sparse.num_tasks("worker") == 2
    assert sparse.task_indices("worker") == [1, 3]
    assert sparse.task_address("worker", 3) == "w3:1"
    assert sparse.job_tasks("chief") == []   # TF fails here on max() of nothing


def test_sparse_job_with_dense_indices_is_a_list():
    assert ClusterSpec({"ps": {1: "b", 0: "a"}}).as_dict() == {"ps": ["a", "b"]}
    assert ClusterSpec({"ps": {"1": "a"}}).as_dict() == {"ps": {1: "a"}}


def test_unknown_job_and_task(sparse):
    for call in (lambda: sparse.num_tasks("nope"), lambda: sparse.task_indices("nope"),
                 lambda: sparse.job_tasks("nope"), lambda: sparse.task_address("nope", 0)):
        with pytest.raises(ValueError, match=r"^No such job in cluster: 'nope'$"):
            call()
    with pytest.raises(ValueError, match=r"^No task with index 2 in job 'worker'$"):
        sparse.task_address("worker", 2)


@pytest.mark.parametrize("cluster,exc,message", [
    ({1: ["a"]}, TypeError, "Job name 1 must be bytes or unicode"),
    ({"ps": [1]}, TypeError, "Task address 1 must be bytes or unicode"),
    ({"ps": [None]}, TypeError, "Task address None must be bytes or unicode"),
    ({"ps": "a:1"}, TypeError, "The tasks for job 'ps' must be a list or a dictionary "
                               "from integers to strings."),
    ({"ps": {"x": "a"}}, ValueError, "invalid literal for int() with base 10: 'x'"),
    (["ps"], TypeError, "`cluster` must be a dictionary mapping one or more job names to "
                        "lists of network addresses, or a `ClusterDef` protocol buffer"),
    (None, TypeError, "`cluster` must be a dictionary"),
])
def test_bad_clusters(cluster, exc, message):
    with pytest.raises(exc) as info:
        ClusterSpec(cluster)
    assert str(info.value).startswith(message)


def test_bad_job_name_among_good_ones_names_it():
    with pytest.raises(TypeError, match="Job name 7 must be bytes or unicode"):
        ClusterSpec({"ps": ["a"], 7: ["b"]})


def test_cluster_def_is_sorted_and_round_trips(sparse):
    cd = sparse.as_cluster_def()
    assert isinstance(cd, cluster_pb2.ClusterDef)
    assert [j.name for j in cd.job] == ["chief", "ps", "worker"]
    assert dict(cd.job[2].tasks) == {1: "w1:1", 3: "w3:1"}
    back = ClusterSpec(cd)
    assert back.as_cluster_def() is cd
    assert back.jobs == ["chief", "ps", "worker"]   # the ClusterDef's (sorted) order
    assert back == sparse and back.as_dict() == sparse.as_dict()
    parsed = cluster_pb2.ClusterDef.FromString(cd.SerializeToString())
    assert ClusterSpec(parsed) == sparse


def test_cluster_def_bytes_are_deterministic():
    a = ClusterSpec({"b": ["x:1"], "a": {2: "y:2", 0: "y:0"}})
    b = ClusterSpec({"a": {0: "y:0", 2: "y:2"}, "b": ["x:1"]})
    assert a.as_cluster_def().SerializeToString() == b.as_cluster_def().SerializeToString()
    expected = cluster_pb2.ClusterDef()
    job = expected.job.add(name="a")
    job.tasks[0], job.tasks[2] = "y:0", "y:2"
    expected.job.add(name="b").tasks[0] = "x:1"
    assert a.as_cluster_def() == expected


def test_copy_from_cluster_spec_is_independent():
    a = ClusterSpec({"b": ["x"], "a": ["y"]})
    b = ClusterSpec(a)
    assert b.jobs == ["a", "b"] and b == a
    b.as_cluster_def().job[0].tasks[5] = "z"
    assert a.as_cluster_def().job[0].tasks.get(5) is None


def test_bytes_addresses_kept_as_given_but_decoded_in_the_proto():
    c = ClusterSpec({"ps": [b"a:1"]})
    assert c.as_dict() == {"ps": [b"a:1"]}
    assert c.as_cluster_def().job[0].tasks[0] == "a:1"


def test_foreign_cluster_def_message():
    """A ClusterDef from another package (TensorFlow's) is read by its wire format."""
    wire = ClusterSpec({"ps": ["p:1"], "worker": {4: "w:4"}}).as_cluster_def()

    class Descriptor:
        name = "ClusterDef"

    class ForeignClusterDef:
        DESCRIPTOR = Descriptor()

        def SerializeToString(self) -> bytes:
            return wire.SerializeToString()

    c = ClusterSpec(ForeignClusterDef())
    assert c.as_dict() == {"ps": ["p:1"], "worker": {4: "w:4"}}


def test_equality_bool_hash():
    a = ClusterSpec({"ps": ["a"]})
    assert a == ClusterSpec({"ps": {0: "a"}})
    assert not a != ClusterSpec({"ps": ["a"]})
    assert a != ClusterSpec({"ps": ["b"]})
    # as TF: a plain dict is compared with the internal {job: {index: address}} form
    assert a == {"ps": {0: "a"}}
    assert not a == {"ps": ["a"]}
    assert not ClusterSpec({}) and bool(a)
    with pytest.raises(TypeError):
        hash(a)


_jobs = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True),
    st.one_of(st.lists(st.from_regex(r"[a-z0-9.]{1,8}:[0-9]{1,5}", fullmatch=True),
                       max_size=4),
              st.dictionaries(st.integers(0, 20),
                              st.from_regex(r"[a-z0-9.]{1,8}:[0-9]{1,5}", fullmatch=True),
                              max_size=4)),
    max_size=4)


@settings(max_examples=60, deadline=None)
@given(_jobs)
def test_round_trips(cluster):
    c = ClusterSpec(cluster)
    wire = c.as_cluster_def().SerializeToString()
    again = ClusterSpec(cluster_pb2.ClusterDef.FromString(wire))
    assert again == c
    assert again.as_dict() == c.as_dict()
    assert ClusterSpec(c.as_dict()) == c
    for job, tasks in cluster.items():
        items = dict(enumerate(tasks)) if isinstance(tasks, list) else tasks
        assert c.num_tasks(job) == len(items)
        assert c.task_indices(job) == sorted(items)
        for i, address in items.items():
            assert c.task_address(job, i) == address
            assert c.job_tasks(job)[i] == address
        dense = sorted(items) == list(range(len(items)))
        assert isinstance(c.as_dict()[job], list) == (dense and bool(items))


# -- FLOWRT_CONFIG ------------------------------------------------------------------------
_CONFIG = {"cluster": {"ps": ["h:1"], "worker": ["h:2", "h:3"]},
           "task": {"type": "worker", "index": 1}}


def test_config_from_value():
    spec, job, task = cluster_from_environment(json.dumps(_CONFIG))
    assert spec == ClusterSpec(_CONFIG["cluster"])
    assert (job, task) == ("worker", 1)


def test_config_from_environment(monkeypatch):
    monkeypatch.setenv("FLOWRT_CONFIG", json.dumps(_CONFIG))
    spec, job, task = cluster_from_environment()
    assert spec.as_dict() == _CONFIG["cluster"] and (job, task) == ("worker", 1)
    monkeypatch.setenv("OTHER_CONFIG", json.dumps(
        {"cluster": {"ps": {"2": "h:9"}}, "task": {"type": "ps", "index": 2}}))
    spec, job, task = cluster_from_environment(env_var="OTHER_CONFIG")
    assert spec.as_dict() == {"ps": {2: "h:9"}} and (job, task) == ("ps", 2)


def test_config_index_defaults_to_zero():
    _, job, task = cluster_from_environment(
        json.dumps({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}}))
    assert (job, task) == ("ps", 0)


def test_config_unset(monkeypatch):
    monkeypatch.delenv("FLOWRT_CONFIG", raising=False)
    with pytest.raises(ValueError, match="FLOWRT_CONFIG is not set"):
        cluster_from_environment()


@pytest.mark.parametrize("text,message", [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "must be a JSON object, got list"),
    ('{"task": {"type": "ps", "index": 0}}', 'needs a non-empty "cluster" object'),
    ('{"cluster": {}, "task": {"type": "ps"}}', 'needs a non-empty "cluster" object'),
    ('{"cluster": {"ps": "a:1"}, "task": {"type": "ps"}}',
     "bad \"cluster\": The tasks for job 'ps' must be a list"),
    ('{"cluster": {"ps": ["a:1"]}}', 'needs a "task" object'),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"index": 0}}', '"task" needs a "type" string'),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": "0"}}',
     "\"index\" must be an integer, got '0'"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": true}}',
     "must be an integer"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "worker", "index": 0}}',
     "task type 'worker' is not a job of the cluster \\(jobs: ps\\)"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 3}}',
     "job 'ps' has no task with index 3"),
])
def test_config_errors(text, message):
    with pytest.raises(ValueError, match=message):
        cluster_from_environment(text)
