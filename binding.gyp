{
  "target_defaults": {
    "cflags_cc": [
      "-std=c++17",
      "-Wall",
      "-Wextra",
      "-O2",
      "-fno-exceptions"
    ],
    "cflags_cc!": [
      "-std=gnu++17"
    ],
    "include_dirs": [
      "native/common"
    ]
  },
  "targets": [
    {
      "target_name": "seccomp_agent",
      "sources": [
        "<!@(ls -1 native/addon/*.cpp)"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native/common"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED"
      ],
      "cflags_cc": [
        "-fno-exceptions",
        "-fvisibility=hidden",
        "-fno-semantic-interposition"
      ]
    },
    {
      "target_name": "seccomp_channel_io",
      "sources": [
        "native/channel/module.cpp",
        "native/channel/socket_io.cpp",
        "native/channel/ring_io.cpp"
      ],
      "defines": [
        "NAPI_VERSION=8"
      ]
    },
    {
      "target_name": "seccomp_emulator_addon",
      "sources": [
        "test/cmd/emulator-addon/module.cpp",
        "test/cmd/emulator-addon/emulator_binding.cpp",
        "native/addon/action_result.cpp",
        "native/addon/emulator.cpp",
        "native/addon/kill_freeze.cpp",
        "native/addon/cgroup_paths.cpp",
        "native/addon/nshelper_pool.cpp",
        "native/addon/nshelper_spawn.cpp",
        "native/addon/nshelper_replies.cpp",
        "native/addon/nshelper_requests.cpp",
        "native/addon/nshelper_pool_direct.cpp",
        "native/addon/notify_fd.cpp",
        "native/addon/target_memory.cpp"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native/addon",
        "native/common"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED"
      ],
      "cflags_cc": [
        "-fno-exceptions"
      ]
    },
    {
      "target_name": "seccomp-run",
      "type": "executable",
      "sources": [
        "native/tools/seccomp_run.cpp"
      ]
    },
    {
      "target_name": "seccomp-nshelper",
      "type": "executable",
      "sources": [
        "native/tools/nshelper.cpp",
        "native/tools/nshelper_resolve.cpp",
        "native/tools/nshelper_mkdir.cpp",
        "native/tools/nshelper_mount.cpp",
        "native/tools/nshelper_credentials.cpp",
        "native/tools/nshelper_target.cpp",
        "native/tools/nshelper_replay.cpp",
        "native/tools/nshelper_recovery.cpp",
        "native/tools/nshelper_answer.cpp",
        "native/tools/mount_confinement.cpp",
        "native/addon/notify_fd.cpp"
      ],
      "include_dirs": [
        "native/addon"
      ],
      "libraries": [
        "-lpthread"
      ]
    },
    {
      "target_name": "seccomp-keeper",
      "type": "executable",
      "sources": [
        "native/tools/keeper.cpp"
      ]
    },
    {
      "target_name": "seccomp-bench-responder",
      "type": "executable",
      "sources": [
        "bench/native/bench_responder.cpp"
      ],
      "libraries": [
        "-lpthread"
      ]
    },
    {
      "target_name": "seccomp-bench-workload",
      "type": "executable",
      "sources": [
        "bench/native/bench_workload.cpp"
      ],
      "libraries": [
        "-lpthread"
      ]
    },
    {
      "target_name": "seccomp-native-tests",
      "type": "executable",
      "sources": [
        "test/cmd/native-tests/main.cpp",
        "native/addon/answer_tally.cpp",
        "native/addon/cgroup_paths.cpp",
        "native/addon/pending_table.cpp",
        "native/addon/decision_check.cpp",
        "native/addon/emulation_table.cpp",
        "native/addon/event_encoder.cpp",
        "native/addon/rule_table.cpp",
        "native/addon/rule_set.cpp",
        "native/addon/rule_arguments.cpp",
        "native/addon/policy_wire.cpp",
        "native/addon/journal.cpp",
        "native/addon/record_file.cpp",
        "native/addon/handoff_formats.cpp",
        "native/addon/notify_fd.cpp",
        "native/tools/nshelper_target.cpp",
        "native/tools/nshelper_answer.cpp"
      ],
      "include_dirs": [
        "native/addon",
        "native/common",
        "native/tools"
      ]
    },
    {
      "target_name": "seccomp-signal-workload",
      "type": "executable",
      "sources": [
        "test/cmd/signal-workload/main.cpp"
      ],
      "ldflags": [
        "-static"
      ]
    },
    {
      "target_name": "seccomp-thread-views",
      "type": "executable",
      "sources": [
        "test/cmd/thread-views/main.cpp"
      ],
      "ldflags": [
        "-static"
      ]
    },
    {
      "target_name": "seccomp-uffd-workload",
      "type": "executable",
      "sources": [
        "test/cmd/uffd-workload/main.cpp"
      ]
    },
    {
      "target_name": "seccomp-abi-workload",
      "type": "executable",
      "sources": [
        "test/cmd/abi-workload/main.cpp"
      ],
      "ldflags": [
        "-static"
      ]
    },
    {
      "target_name": "seccomp-idle-clients",
      "type": "executable",
      "sources": [
        "test/cmd/idle-clients/main.cpp"
      ]
    },
    {
      "target_name": "seccomp-soak-workload",
      "type": "executable",
      "sources": [
        "bench/native/soak_workload.cpp"
      ],
      "libraries": [
        "-lpthread"
      ]
    }
  ]
}