# OUTBOX_COMMIT: the commit the sources were checked out at (12 hex digits),
# empty when they are not a git checkout or git is missing. CMake configures
# again when HEAD moves, so a rebuild after a commit or a checkout names the
# new commit.
set(OUTBOX_COMMIT "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE OUTBOX_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _outbox_git_rc ERROR_QUIET)
  if(NOT _outbox_git_rc EQUAL 0)
    set(OUTBOX_COMMIT "")
  else()
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      OUTPUT_VARIABLE _outbox_git_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND ${GIT_EXECUTABLE} symbolic-ref -q HEAD
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      OUTPUT_VARIABLE _outbox_git_ref OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    foreach(_f HEAD packed-refs ${_outbox_git_ref})
      if(EXISTS "${_outbox_git_dir}/${_f}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_outbox_git_dir}/${_f}")
      endif()
    endforeach()
  endif()
endif()
