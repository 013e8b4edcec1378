# Fails the build when a file under src/ includes a layer it must not: the
# layers stack from core up to the server, and each sees only those below it
# (and the public API, include/bertrt/). Run by the bertrt_layers target
# before every library builds:
#   cmake -DSRC_DIR=<repo>/src -P cmake/check_layers.cmake
#
# The layers each may include, lowest first.
set(allowed_core "")
set(allowed_tokenizer "core")
set(allowed_ops "core")
set(allowed_model "core;ops")
set(allowed_scheduler "core")
set(allowed_backends "core;model;ops;cute;cutlass")
set(allowed_checkpoint "core;model;ops")
set(allowed_families "core;model;ops;checkpoint")
set(allowed_importer "core;model;ops;checkpoint;families")
set(allowed_builder "core;model;ops;checkpoint;importer;families")
set(allowed_serving "core;tokenizer;model;ops;backends;scheduler")
set(allowed_server "core;serving")
set(allowed_loadgen "core")
# Headers a layer must not include directly: the serving core knows no
# HTTP, JSON or protobuf (its front ends translate); below the builder, no one
# reads or writes plans (the public plan.h is the builder's).
set(forbidden_serving "nlohmann/;google/protobuf/;boost/;grpc;grpcpp/;nghttp2/")
set(forbidden_checkpoint "bertrt/plan.h")
set(forbidden_families "bertrt/plan.h")
set(forbidden_importer "bertrt/plan.h")

if(NOT SRC_DIR)
  message(FATAL_ERROR "check_layers: pass -DSRC_DIR=<the src/ folder>")
endif()
file(GLOB layers RELATIVE "${SRC_DIR}" "${SRC_DIR}/*")
set(violations "")
foreach(layer ${layers})
  if(NOT IS_DIRECTORY "${SRC_DIR}/${layer}")
    continue()
  endif()
  if(NOT DEFINED allowed_${layer})
    string(APPEND violations "\n  src/${layer}/: a layer check_layers.cmake does not know: "
                             "add it with the layers it may include")
    continue()
  endif()
  file(GLOB_RECURSE sources "${SRC_DIR}/${layer}/*.h" "${SRC_DIR}/${layer}/*.cc"
       "${SRC_DIR}/${layer}/*.cu" "${SRC_DIR}/${layer}/*.cuh")
  foreach(source ${sources})
    foreach(library ${forbidden_${layer}})
      file(STRINGS "${source}" uses REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]${library}")
      foreach(line ${uses})
        file(RELATIVE_PATH where "${SRC_DIR}/.." "${source}")
        string(STRIP "${line}" line)
        string(APPEND violations "\n  ${where}: ${line} (${layer} must not use ${library})")
      endforeach()
    endforeach()
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"/]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"/]+)/.*" "\\1" target "${line}")
      if(target STREQUAL layer OR target STREQUAL "bertrt")
        continue()
      endif()
      list(FIND allowed_${layer} "${target}" at)
      if(at EQUAL -1)
        file(RELATIVE_PATH where "${SRC_DIR}/.." "${source}")
        string(STRIP "${line}" line)
        set(may "${allowed_${layer}}")
        if(NOT may)
          set(may "no other layer")
        endif()
        string(REPLACE ";" ", " may "${may}")
        string(APPEND violations "\n  ${where}: ${line} (${layer} may include ${may})")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "an include crosses a layer boundary:${violations}\n"
                      "Move the code to the layer it belongs to, or pass what it needs down "
                      "(cmake/check_layers.cmake lists which layer sees which).")
endif()
